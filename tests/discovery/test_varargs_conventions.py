"""What ``*args`` holds, read from the code (issue 18, corpus 8a held-out).

Two conventions pull opposite ways:

- a checkpoint ``forward(ctx, func, n, *args)`` that keeps ``args[:n]`` as the inputs and
  ``args[n:]`` as the parameters (its caller passes ``*inputs, *func.parameters()``; torchdeq's
  ``DEQGradCkpt``) and returns ``(None, None, *grads)``: the module's parameters go after the
  inputs. Before, ``args[n:]`` was empty and a correct backward got ``missing-param-grad``;
- ``forward(ctx, x, y, f, batched, maximize, *args)`` whose backward returns a fixed five
  values (predopt's ``PerturbedFunc``): forward takes exactly five inputs, ``*args`` is empty.
  Before, the module's parameters went into ``*args`` and a correct backward got
  ``wrong-grad-count``.

The rule: a backward whose every ``return`` is a tuple literal of one length sizes ``*args``;
one that unpacks a variable number (``*grads``) leaves it to the split and the modules.
"""

from __future__ import annotations

import pytest
import torch
from source_cases import check_rows, error_codes, load_source

from gradsmith.discovery import Synthesized, synthesize

CASES = '''
import torch


class ParamCkpt(torch.autograd.Function):
    """Checkpoint of a module call: *args holds its inputs, then its parameters."""

    @staticmethod
    def forward(ctx, func, n_inputs, *args):
        ctx.func = func
        ctx.inputs, ctx.params = args[:n_inputs], args[n_inputs:]
        with torch.no_grad():
            return func(*ctx.inputs)

    @staticmethod
    def backward(ctx, *grads):
        inputs = [x.detach().requires_grad_(x.requires_grad) for x in ctx.inputs]
        with torch.enable_grad():
            out = ctx.func(*inputs)
        every = (*inputs, *ctx.params)
        wanted = [t for t in every if t.requires_grad]
        got = iter(torch.autograd.grad(out, wanted, grads, allow_unused=True))
        return (None, None, *(next(got) if t.requires_grad else None for t in every))


class ParamCkptDoubled(torch.autograd.Function):
    """ParamCkpt with a planted wrong backward: the parameters' gradients doubled."""

    @staticmethod
    def forward(ctx, func, n_inputs, *args):
        ctx.func = func
        ctx.inputs, ctx.params = args[:n_inputs], args[n_inputs:]
        with torch.no_grad():
            return func(*ctx.inputs)

    @staticmethod
    def backward(ctx, *grads):
        inputs = [x.detach().requires_grad_(x.requires_grad) for x in ctx.inputs]
        with torch.enable_grad():
            out = ctx.func(*inputs)
        every = (*inputs, *ctx.params)
        wanted = [t for t in every if t.requires_grad]
        got = iter(torch.autograd.grad(out, wanted, grads, allow_unused=True))
        grads = [next(got) if t.requires_grad else None for t in every]
        n = len(inputs)
        return (None, None, *grads[:n], *(None if g is None else 2 * g for g in grads[n:]))


class FixedFive(torch.autograd.Function):
    """sum((x - f(y))**2): f is called with forward's *args, backward returns five values."""

    @staticmethod
    def forward(ctx, x, y, f, batched, maximize, *args):
        diff = x - f(y, *args)
        if not maximize:
            diff = -diff
        if batched:
            loss = torch.sum(diff.reshape(diff.shape[0], -1) ** 2, dim=-1)
        else:
            loss = torch.sum(diff ** 2)
        ctx.save_for_backward(diff)
        ctx.batched, ctx.maximize = batched, maximize
        return loss

    @staticmethod
    def backward(ctx, dy):
        diff, = ctx.saved_tensors
        if ctx.batched:
            dy = dy.reshape([dy.shape[0]] + (diff.dim() - 1) * [1])
        sign = 1.0 if ctx.maximize else -1.0
        return 2 * sign * dy * diff, None, None, None, None


class FixedFiveHalved(torch.autograd.Function):
    """FixedFive with a planted wrong backward: the factor 2 dropped."""

    @staticmethod
    def forward(ctx, x, y, f, batched, maximize, *args):
        diff = x - f(y, *args)
        if not maximize:
            diff = -diff
        if batched:
            loss = torch.sum(diff.reshape(diff.shape[0], -1) ** 2, dim=-1)
        else:
            loss = torch.sum(diff ** 2)
        ctx.save_for_backward(diff)
        ctx.batched, ctx.maximize = batched, maximize
        return loss

    @staticmethod
    def backward(ctx, dy):
        diff, = ctx.saved_tensors
        if ctx.batched:
            dy = dy.reshape([dy.shape[0]] + (diff.dim() - 1) * [1])
        sign = 1.0 if ctx.maximize else -1.0
        return sign * dy * diff, None, None, None, None
'''


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    path = tmp_path_factory.mktemp("varargs_conventions") / "conventions.py"
    return check_rows(path, CASES), path


def test_a_split_tail_after_a_module_holds_its_parameters(rows):
    by_name, path = rows
    module = load_source(path, "conventions_ckpt")
    found = synthesize(module.ParamCkpt)
    assert isinstance(found, Synthesized), found
    func, n, *rest = found.args
    params = list(func.parameters())
    assert params and len(rest) == n + len(params)
    assert all(a is b for a, b in zip(rest[n:], params))  # the module's own, as mem_gc passes
    assert "then the 1 parameters of the modules" in found.description
    # Independent of gradsmith: plain autograd of the module call gives every gradient.
    inputs = [t.detach().requires_grad_() for t in rest[:n]]
    want = torch.autograd.grad(func(*inputs).sum(), [*inputs, *params], materialize_grads=True)
    got = torch.autograd.grad(module.ParamCkpt.apply(func, n, *rest).sum(), rest,
                              materialize_grads=True)
    assert any(bool(g.ne(0).any()) for g in got[n:])  # the parameters' gradient is exercised
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)
    row = by_name["ParamCkpt"]
    assert row["verdict"] == "pass", row["text"]


def test_a_wrong_parameter_gradient_through_the_tail_still_fails(rows):
    by_name, _ = rows
    wrong = by_name["ParamCkptDoubled"]
    assert wrong["verdict"] == "fail", wrong["text"]
    assert error_codes(wrong) == {"gradient-mismatch"}, wrong["text"]


def test_a_fixed_count_of_returned_gradients_sizes_varargs(rows):
    by_name, path = rows
    module = load_source(path, "conventions_fixed")
    found = synthesize(module.FixedFive)
    assert isinstance(found, Synthesized), found
    assert len(found.args) == 5, found.description  # *args empty, as backward's five say
    x, y, f, batched, maximize = found.args
    # Independent of gradsmith: autograd of the same expression, written out.
    xs = x.detach().requires_grad_()
    diff = xs - f(y.detach())
    diff = diff if maximize else -diff
    loss = diff.reshape(diff.shape[0], -1).pow(2).sum(-1) if batched else diff.pow(2).sum()
    want, = torch.autograd.grad(loss.sum(), xs)
    got, = torch.autograd.grad(module.FixedFive.apply(*found.args).sum(), x)
    torch.testing.assert_close(got, want)
    row = by_name["FixedFive"]
    assert row["verdict"] == "pass", row["text"]


def test_a_wrong_backward_with_a_fixed_count_still_fails(rows):
    by_name, _ = rows
    wrong = by_name["FixedFiveHalved"]
    assert wrong["verdict"] == "fail", wrong["text"]
    assert "wrong-grad-count" not in error_codes(wrong), wrong["text"]
    assert error_codes(wrong) & {"gradient-mismatch", "undeclared-estimator"}, wrong["text"]


CALLED_WITH_MORE = '''
import torch


class DropsExtra(torch.autograd.Function):
    """Its caller passes a scale through *args, but backward returns two values."""

    @staticmethod
    def forward(ctx, x, f, *args):
        ctx.save_for_backward(x)
        return f(x, *args)

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g, None


def scaled(x, w):
    return DropsExtra.apply(x, torch.mul, w)
'''


def test_a_call_site_passing_more_keeps_the_wrong_count_caught(tmp_path):
    path = tmp_path / "called.py"
    row, = check_rows(path, CALLED_WITH_MORE).values()
    assert row["verdict"] == "fail", row["text"]
    assert "wrong-grad-count" in error_codes(row), row["text"]
    # what the finding says, shown with torch alone: the caller's call raises in backward
    module = load_source(path, "called_case")
    x = torch.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="incorrect number of gradients"):
        module.scaled(x, torch.ones(3, requires_grad=True)).sum().backward()
