"""Backward at all-zero inputs: a programming error in the branch for zero (never reached by
random inputs) is ``backward-error-at-zero``; a derivative that does not exist there (NaN,
inf, a division by zero) is not reported."""

from __future__ import annotations

import math

import torch

import gradsmith


def _sinc(x):
    safe = torch.where(x == 0, torch.ones_like(x), x)
    return torch.where(x == 0, torch.ones_like(x), torch.sin(safe) / safe)


class _Sinc(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return _sinc(x)


class SincBuggyZero(_Sinc):
    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        flat, out = x.reshape(-1), torch.empty(x.numel(), dtype=x.dtype)
        for i in range(flat.numel()):
            v = flat[i]
            out[i] = v.squeeze()[0] * 0 if v.abs() < 1e-12 else torch.cos(v) / v - torch.sin(v) / v**2
        return g * out.view_as(x)


class SincRightZero(_Sinc):
    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        safe = torch.where(x.abs() < 1e-12, torch.ones_like(x), x)
        d = torch.cos(safe) / safe - torch.sin(safe) / safe**2
        return g * torch.where(x.abs() < 1e-12, torch.zeros_like(x), d)


class SqrtAbs(torch.autograd.Function):  # the derivative is infinite at 0: inf is right
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.abs().sqrt()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * torch.sign(x) / (2 * x.abs().sqrt())


class NormScaled(torch.autograd.Function):  # divides by a Python float: raises at zero only
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.norm()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x / float(x.norm())


def _x():
    return torch.randn(3, 4, dtype=torch.float64, requires_grad=True)


def test_a_crashing_zero_branch_is_an_error():
    report = gradsmith.check(SincBuggyZero, _x(), compat=False)
    assert "backward-error-at-zero" in report.codes("error")
    zero = torch.zeros(2, dtype=torch.float64, requires_grad=True)
    try:
        SincBuggyZero.apply(zero).sum().backward()
    except IndexError:
        pass
    else:
        raise AssertionError("the zero branch should raise IndexError")


def test_a_right_zero_branch_passes_and_matches_torch_sinc():
    x = _x()
    report = gradsmith.check(SincRightZero, x, compat=False)
    assert report.passed and "backward-error-at-zero" not in report.codes()
    # Independent reference: torch.sinc(x / pi) is sin(x) / x, its derivative 0 at 0.
    for point in (x, torch.zeros(3, dtype=torch.float64, requires_grad=True)):
        p = point.detach().clone().requires_grad_()
        (want,) = torch.autograd.grad(torch.sinc(p / math.pi).sum(), p)
        (got,) = torch.autograd.grad(SincRightZero.apply(point).sum(), point)
        torch.testing.assert_close(got, want)


def test_no_derivative_at_zero_is_not_reported():
    for fn in (SqrtAbs, NormScaled):
        report = gradsmith.check(fn, _x(), compat=False)
        assert "backward-error-at-zero" not in report.codes(), fn.__name__
        assert report.passed, (fn.__name__, report.codes("error"))
