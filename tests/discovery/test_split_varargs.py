"""``*args`` that forward splits at an int parameter (a checkpoint's ``forward(ctx,
run_function, length, *args)`` keeps ``args[:length]`` as inputs and ``args[length:]`` as the
parameters): synthesis gives ``length`` tensors with ``length >= 2``, so two inputs are
differentiable and the frozen-input check runs. Before, ``length=2`` met a single tensor, the
slice took everything and a backward that crashes on a frozen input PASSed."""

from __future__ import annotations

import pytest
import torch
from source_cases import check_rows, error_codes, load_source

from gradsmith.discovery import Synthesized, synthesize
from gradsmith.discovery.callables import SyntheticFn

CASES = '''
import torch


class KeepFlag(torch.autograd.Function):
    """Keeps each input's requires_grad, then asks autograd.grad for all of them."""

    @staticmethod
    def forward(ctx, run_function, length, *args):
        ctx.run_function = run_function
        ctx.input_tensors = list(args[:length])
        ctx.input_params = list(args[length:])
        with torch.no_grad():
            return ctx.run_function(*ctx.input_tensors)

    @staticmethod
    def backward(ctx, *grads):
        for i in range(len(ctx.input_tensors)):
            t = ctx.input_tensors[i]
            ctx.input_tensors[i] = t.detach()
            ctx.input_tensors[i].requires_grad = t.requires_grad
        with torch.enable_grad():
            out = ctx.run_function(*ctx.input_tensors)
        g = torch.autograd.grad(out, ctx.input_tensors + ctx.input_params, grads,
                                allow_unused=True)
        return (None, None) + g


class ForceGrad(torch.autograd.Function):
    """Makes every input require grad on its copy: frozen inputs are fine."""

    @staticmethod
    def forward(ctx, run_function, length, *args):
        ctx.run_function = run_function
        ctx.input_tensors = list(args[:length])
        ctx.input_params = list(args[length:])
        with torch.no_grad():
            return ctx.run_function(*ctx.input_tensors)

    @staticmethod
    def backward(ctx, *grads):
        ctx.input_tensors = [x.detach().requires_grad_(True) for x in ctx.input_tensors]
        with torch.enable_grad():
            out = ctx.run_function(*[x.view_as(x) for x in ctx.input_tensors])
        g = torch.autograd.grad(out, ctx.input_tensors + ctx.input_params, grads,
                                allow_unused=True)
        return (None, None) + g


class Doubled(torch.autograd.Function):
    """ForceGrad with a planted wrong backward: every gradient twice the true one."""

    @staticmethod
    def forward(ctx, run_function, length, *args):
        ctx.run_function = run_function
        ctx.input_tensors = list(args[:length])
        with torch.no_grad():
            return ctx.run_function(*ctx.input_tensors)

    @staticmethod
    def backward(ctx, *grads):
        inputs = [x.detach().requires_grad_(True) for x in ctx.input_tensors]
        with torch.enable_grad():
            out = ctx.run_function(*inputs)
        g = torch.autograd.grad(out, inputs, grads)
        return (None, None) + tuple(2 * v for v in g)
'''


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    path = tmp_path_factory.mktemp("split_varargs") / "checkpoints.py"
    return check_rows(path, CASES), path


def test_split_varargs_get_as_many_tensors_as_the_int_they_are_split_at(rows):
    module = load_source(rows[1], "checkpoints_case")
    found = synthesize(module.ForceGrad)
    assert isinstance(found, Synthesized), found
    run_function, length, *tensors = found.args
    assert length >= 2 and len(tensors) == length
    assert all(t.requires_grad for t in tensors)
    # Independent of gradsmith: plain autograd of the same function of the same tensors.
    inputs = [t.detach().requires_grad_() for t in tensors]
    want = torch.autograd.grad(run_function(*inputs).sum(), inputs)
    got = torch.autograd.grad(module.ForceGrad.apply(run_function, length, *tensors).sum(),
                              tensors)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)
    assert "forward splits it at length" in found.description


def test_a_backward_that_crashes_on_a_frozen_input_fails(rows):
    by_name, _ = rows
    row = by_name["KeepFlag"]
    assert row["verdict"] == "fail", row["text"]
    assert error_codes(row) == {"needs-input-grad-mismatch"}, row["text"]
    # what the finding says happens, shown with torch alone: one input frozen, backward raises
    module = load_source(rows[1], "checkpoints_case2")
    x, mask = torch.randn(3, 4, requires_grad=True), torch.randn(3, 4)
    out = module.KeepFlag.apply(SyntheticFn(0.75, False), 2, x, mask)
    with pytest.raises(RuntimeError, match="does not require grad"):
        out.sum().backward()


def test_the_correct_twin_passes_and_a_wrong_backward_still_fails(rows):
    by_name, _ = rows
    assert by_name["ForceGrad"]["verdict"] == "pass", by_name["ForceGrad"]["text"]
    wrong = by_name["Doubled"]
    assert wrong["verdict"] == "fail" and "gradient-mismatch" in error_codes(wrong), wrong["text"]
