"""A backward that returns grad_output unchanged where forward is a differentiable op (issue
18, corpus 13b held-out: DeepShift's straight-through log and abs, and a product whose sign
factor gets the gradient as if it were added). Zero configuration reported a bare
gradient-mismatch with no declaration; now an ``undeclared-estimator`` whose printed
surrogate is checked against backward and passes as printed, and a planted wrong backward
still FAILs with that declaration in place."""

from __future__ import annotations

import re

import pytest
import torch

import gradsmith
from gradsmith.discovery import synthesize


def _unary(op, returned):
    class Unary(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return op(x)

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return returned(x, grad)

    return Unary


class SignPath(torch.autograd.Function):
    """``a * b`` forward; ``g * b`` for ``a`` (its gradient), ``g`` for ``b`` (straight
    through, as if added)."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return grad * b, grad


class WrongSignPath(SignPath):
    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return grad * a, grad  # a's gradient uses the wrong factor


def _positive():
    return (torch.rand(3, 4, dtype=torch.float64) + 0.5,)


LOG = _unary(torch.log, lambda x, g: g)
ABS = _unary(torch.abs, lambda x, g: g)
WRONG = {"doubled": _unary(torch.log, lambda x, g: 2 * g),
         "true derivative, doubled": _unary(torch.log, lambda x, g: 2 * g / x),
         "passed through where x > 1 only": _unary(torch.log, lambda x, g: g * (x > 1))}


def _finding(fn, args):
    report = gradsmith.check(fn, *args, compat=False)
    assert not report.passed
    (finding,) = [f for f in report.errors if f.code == "undeclared-estimator"]
    assert [f.code for f in report.errors] == ["undeclared-estimator"], report.errors
    return finding


def _surrogate(line):
    source = re.search(r"surrogate=(lambda .*)\)$", line).group(1)
    return eval(source, {"torch": torch})  # noqa: S307 - a line gradsmith printed


@pytest.mark.parametrize("fn,args", [(LOG, _positive()), (ABS, None), (SignPath, None)],
                         ids=["log", "abs", "sign-path"])
def test_the_printed_surrogate_is_checked_and_passes_as_printed(fn, args):
    args = args or synthesize(fn).args
    finding = _finding(fn, args)
    assert "passed-through" in finding.details["estimator"].values()
    line = finding.details["declaration"]
    assert finding.details["verified"] and "..." not in line, line
    # the independent reference: autograd of the printed surrogate equals backward's gradients
    xs = [a.detach().clone().requires_grad_() for a in args]
    v = torch.randn_like(fn.apply(*xs))
    want = torch.autograd.grad(fn.apply(*xs), xs, v)
    got = torch.autograd.grad(_surrogate(line)(*xs), xs, v)
    for w, g in zip(want, got):
        torch.testing.assert_close(g, w)
    # applied as printed (its own example and surrogate), the check passes
    factory, kwargs = eval(line.lstrip("@").replace("gradsmith.example(", "capture(", 1),  # noqa: S307
                           {"torch": torch, "capture": lambda f, **kw: (f, kw),
                            fn.__name__: fn})
    assert gradsmith.check(fn, *factory(), compat=False, **kwargs).passed


@pytest.mark.parametrize("name", list(WRONG))
def test_a_planted_wrong_backward_fails_with_the_declaration(name):
    report = gradsmith.check(WRONG[name], *_positive(), surrogate=lambda x: x, compat=False)
    assert not report.passed and report.errors


def test_a_wrong_factor_fails_with_the_declaration():
    args = synthesize(SignPath).args
    report = gradsmith.check(WrongSignPath, *args, compat=False,
                             surrogate=lambda a, b: a * b.detach() + b)
    assert not report.passed and report.errors


def test_a_scaled_pass_through_is_no_pass_through():
    """``2 * g`` for log: not the incoming gradient itself, so no passed-through signature
    (a multiple of grad_output on a non-identity forward is a wrong formula)."""
    report = gradsmith.check(WRONG["doubled"], *_positive(), compat=False)
    kinds = [k for f in report.errors if f.code == "undeclared-estimator"
             for k in f.details["estimator"].values()]
    assert "passed-through" not in kinds and not report.passed
