"""A forward computed by an iterative solver to a tolerance is a staircase of steps below
1e-4 of the input's scale: flat at the finite-difference step, so it looked like a
straight-through estimator (corpus 7's zuko ``Bisection``, judged correct through the
implicit function theorem, was an ``undeclared-estimator`` FAIL). At steps above the
tolerance its finite differences agree with backward; a quantizer's coarse stairs and a wrong
backward never do. References: the root's derivative by the implicit function theorem
(``1 / g'(x)``, by torch autograd of ``g``) and autograd of the inverse in closed form."""

from __future__ import annotations

import pytest
import torch
from torch.autograd import Function
from torch.autograd.function import once_differentiable

import gradsmith


def _monotone(x):
    return x + 0.5 * torch.tanh(x)


class HalvingInverse(Function):
    """``x`` with ``g(x) = target``, found by halving ``[lo, hi]`` ``steps`` times."""

    @staticmethod
    def forward(ctx, g, target, lo, hi, steps):
        for _ in range(steps):
            mid = 0.5 * (lo + hi)
            below = g(mid) < target
            lo = torch.where(below, mid, lo)
            hi = torch.where(below, hi, mid)
        root = 0.5 * (lo + hi)
        ctx.g = g
        ctx.save_for_backward(root)
        return root

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        (root,) = ctx.saved_tensors
        return None, grad / HalvingInverse.slope(ctx.g, root), None, None, None

    @staticmethod
    def slope(g, root):
        with torch.enable_grad():
            r = root.detach().requires_grad_()
            (slope,) = torch.autograd.grad(g(r), r, torch.ones_like(r))
        return slope


class HalvingInverseTimesSlope(HalvingInverse):
    """Planted: multiplies by g'(x) where the implicit function theorem divides."""

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        (root,) = ctx.saved_tensors
        return None, grad * HalvingInverse.slope(ctx.g, root), None, None, None


class HalvingInverseOff(HalvingInverse):
    """Planted: 5% too large, a wrong constant."""

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        (root,) = ctx.saved_tensors
        return None, 1.05 * grad / HalvingInverse.slope(ctx.g, root), None, None, None


def _bracketed(seed=0):
    gen = torch.Generator().manual_seed(seed)
    a, b = (torch.randn(3, 4, dtype=torch.float64, generator=gen) for _ in range(2))
    lo, hi = torch.minimum(a, b), torch.maximum(a, b)
    u = 0.3 + 0.4 * torch.rand(3, 4, dtype=torch.float64, generator=gen)
    return _monotone(lo + u * (hi - lo)).requires_grad_(), lo, hi


def test_bisection_to_a_tolerance_passes_with_a_warning_naming_it():
    target, lo, hi = _bracketed()
    root = HalvingInverse.apply(_monotone, target, lo, hi, 16)
    (grad,) = torch.autograd.grad(root.sum(), target)
    # independent reference: the implicit function theorem by hand, g'(x) = 1 + 0.5 sech^2
    torch.testing.assert_close(grad, 1 / (1 + 0.5 / torch.cosh(root.detach()) ** 2))
    report = gradsmith.check(HalvingInverse, _monotone, target, lo, hi, 16)
    assert report.passed, str(report)
    assert "undeclared-estimator" not in report.codes()
    (warning,) = [f for f in report.findings if f.code == "gradient-mismatch"]
    assert warning.severity == "warning" and warning.details["converged_forward"]
    assert "converges to a tolerance" in warning.message


@pytest.mark.parametrize("fn", [HalvingInverseTimesSlope, HalvingInverseOff],
                         ids=lambda f: f.__name__)
def test_wrong_backward_of_a_bisection_still_fails(fn):
    target, lo, hi = _bracketed()
    report = gradsmith.check(fn, _monotone, target, lo, hi, 16)
    assert not report.passed
    assert any(f.severity == "error" for f in report.findings
               if f.code in ("undeclared-estimator", "gradient-mismatch")), str(report)


class FineRoundSTE(Function):
    """A quantizer to ``1 / levels`` with a straight-through backward: a real estimator."""

    @staticmethod
    def forward(ctx, x, levels):
        return torch.round(x * levels) / levels

    @staticmethod
    def backward(ctx, grad):
        return grad, None


@pytest.mark.parametrize("levels", [1.0, 100.0, 256.0, 2200.0])
def test_quantizer_stairs_stay_an_undeclared_estimator(levels):
    x = torch.randn(3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    x.requires_grad_()
    # what forward is: flat between the levels (autograd of round is 0)
    ref = torch.autograd.grad((torch.round(x * levels) / levels).sum(), x)[0]
    assert bool((ref == 0).all())
    report = gradsmith.check(FineRoundSTE, x, levels)
    assert not report.passed
    assert "undeclared-estimator" in report.codes(), str(report)
    assert not any(f.details.get("converged_forward") for f in report.findings)
