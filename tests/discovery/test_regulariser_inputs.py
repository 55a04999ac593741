"""A number the code uses as a small positive regulariser gets tiny positive values (issue 18).

peps-torch's ``SYMEIG``/``SVDGESDD_legacy`` (reduced here, written anew) hand a regulariser
forward saves to ``safe_inverse(x, epsilon) = x / (x**2 + epsilon)`` in backward. Synthesised
as a ``randn`` scalar (negative, O(1)), it made a correct backward wrong by O(1): a false
``gradient-mismatch``. Read from its use (added in a denominator, a ``clamp`` floor, a threshold
on a magnitude) it is now tiny and positive; a planted wrong backward still fails.
"""

from __future__ import annotations

import torch
from torch.autograd import Function

import gradsmith
from gradsmith.discovery import Synthesized, synthesize
from gradsmith.discovery.regularisers import DOMAIN


def safe_inverse(x, epsilon):
    return x / (x ** 2 + epsilon)


class LogAbs(Function):
    """log|x|, whose derivative 1/x backward regularises."""

    @staticmethod
    def forward(ctx, x, ad_reg):
        ctx.save_for_backward(x, ad_reg)
        return torch.log(x.abs())

    @staticmethod
    def backward(ctx, g):
        x, reg = ctx.saved_tensors
        return g * safe_inverse(x, epsilon=reg), None


class LogAbsShifted(Function):
    @staticmethod
    def forward(ctx, x, ad_reg):
        ctx.save_for_backward(x, ad_reg)
        return torch.log(x.abs())

    @staticmethod
    def backward(ctx, g):
        x, reg = ctx.saved_tensors
        return g * safe_inverse(x + 0.25, epsilon=reg), None  # planted: a shifted pole


class Floored(Function):
    @staticmethod
    def forward(ctx, x, smallest):
        ctx.save_for_backward(x, smallest)
        return x * 2

    @staticmethod
    def backward(ctx, g):
        x, smallest = ctx.saved_tensors
        return g * 2 * (x.abs().clamp(min=smallest) > 0), None


class Thresholded(Function):
    @staticmethod
    def forward(ctx, x, cutoff):
        ctx.save_for_backward(x, cutoff)
        return torch.log(x.abs())

    @staticmethod
    def backward(ctx, g):
        x, cutoff = ctx.saved_tensors
        inv = x.clone()
        inv[abs(inv) < cutoff] = float("inf")
        return g * inv.pow(-1), None


def _value(fn, index: int) -> torch.Tensor | float:
    found = synthesize(fn)
    assert isinstance(found, Synthesized), found
    value = found.args[index]
    return value.detach() if isinstance(value, torch.Tensor) else value, found.description


def test_a_regulariser_in_a_denominator_is_tiny_and_positive():
    reg, description = _value(LogAbs, 1)
    assert DOMAIN[0] < reg.min() and reg.max() < DOMAIN[1]
    assert "small positive regulariser" in description and "safe_inverse" in description


def test_a_floor_and_a_magnitude_threshold_are_tiny_and_positive():
    for fn in (Floored, Thresholded):
        value, description = _value(fn, 1)
        assert DOMAIN[0] < value.min() and value.max() < DOMAIN[1], (fn.__name__, description)


def test_the_regularised_backward_passes_and_is_autograds():
    found = synthesize(LogAbs)
    report = gradsmith.check(LogAbs, *found.args)
    assert report.passed, report.summary()
    x, reg = found.args
    x = x.detach().clone().requires_grad_()
    g = torch.randn(x.shape, dtype=x.dtype, generator=torch.Generator().manual_seed(3))
    (got,) = torch.autograd.grad(LogAbs.apply(x, reg), x, g)
    y = x.detach().clone().requires_grad_()
    (want,) = torch.autograd.grad(torch.log(y.abs()), y, g)
    torch.testing.assert_close(got, want)


def test_a_wrong_pole_still_fails():
    found = synthesize(LogAbsShifted)
    report = gradsmith.check(LogAbsShifted, *found.args)
    assert not report.passed and "gradient-mismatch" in report.codes("error"), report.summary()


class Ranged(Function):
    @staticmethod
    def forward(ctx, x, clip_lo, clip_hi):
        ctx.save_for_backward(x, clip_lo, clip_hi)
        return x.clamp(clip_lo, clip_hi)

    @staticmethod
    def backward(ctx, g):
        x, lo, hi = ctx.saved_tensors
        return g * ((x >= lo) & (x <= hi)), None, None


def test_a_clamp_to_a_range_is_the_operation_not_a_floor():
    found = synthesize(Ranged)
    assert "regulariser" not in found.description, found.description


def test_a_differentiated_input_is_not_read_as_a_regulariser():
    class Ratio(Function):
        @staticmethod
        def forward(ctx, x, b):
            ctx.save_for_backward(x, b)
            return x / (x * x + b)

        @staticmethod
        def backward(ctx, g):
            x, b = ctx.saved_tensors
            d = x * x + b
            return g * (b - x * x) / d ** 2, -g * x / d ** 2

    value, description = _value(Ratio, 1)
    assert "regulariser" not in description


class LogAbsModern(Function):
    """Modern style: forward(x, reg) + setup_context, which saves the regulariser (yastn's
    SYMEIG does so): the use in backward is found through setup_context's ``inputs``."""

    @staticmethod
    def forward(x, reg):
        return torch.log(x.abs())

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, reg = inputs
        ctx.save_for_backward(x, reg)

    @staticmethod
    def backward(ctx, g):
        x, reg = ctx.saved_tensors
        return g * safe_inverse(x, epsilon=reg), None


class LogAbsModernShifted(LogAbsModern):
    @staticmethod
    def backward(ctx, g):
        x, reg = ctx.saved_tensors
        return g * safe_inverse(x + 0.25, epsilon=reg), None  # planted: a shifted pole


def test_a_regulariser_saved_in_setup_context_is_tiny_and_the_function_passes():
    reg, description = _value(LogAbsModern, 1)
    assert DOMAIN[0] < reg.min() and reg.max() < DOMAIN[1], description
    found = synthesize(LogAbsModern)
    report = gradsmith.check(LogAbsModern, *found.args)
    assert report.passed, report.summary()
    x = found.args[0].detach().clone().requires_grad_()
    g = torch.randn(x.shape, dtype=x.dtype, generator=torch.Generator().manual_seed(4))
    (got,) = torch.autograd.grad(LogAbsModern.apply(x, found.args[1]), x, g)
    y = x.detach().clone().requires_grad_()
    (want,) = torch.autograd.grad(torch.log(y.abs()), y, g)
    torch.testing.assert_close(got, want)


def test_a_wrong_pole_saved_in_setup_context_still_fails():
    found = synthesize(LogAbsModernShifted)
    report = gradsmith.check(LogAbsModernShifted, *found.args)
    assert not report.passed and "gradient-mismatch" in report.codes("error"), report.summary()
