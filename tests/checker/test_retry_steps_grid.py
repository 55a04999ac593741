"""Numerics' larger-step retry does not line up with a decimal or binary quantization grid.

Before this change the retry steps were 1e-4, 5e-5, 1e-3 and 5e-4: ``round(x * 1000) / 1000``
moved by exactly two and one grid points across +-1e-3 and +-5e-4, its difference quotient was
exactly 1, the straight-through backward (``g``) agreed with it, and the quantizer PASSed with no
finding (1,000 and 2,000 levels). References: the plain expressions' own autograd (the smooth
Functions) and the hand count of grid points crossed (the quantizers).
"""

import pytest
import torch

import gradsmith
from gradsmith.checker import numerics


def _quantizer(levels, scale=1.0):
    class Quantize(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return torch.round(x * levels) / levels

        @staticmethod
        def backward(ctx, g):
            return scale * g

    Quantize.__name__ = Quantize.__qualname__ = f"Quantize{levels}"
    return Quantize


class Float32Sin(torch.autograd.Function):
    """Computes in float32 whatever it is handed: the noise the retry exists for."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.sin(x.float()).to(x.dtype)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * torch.cos(x)


class Cube(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * x * x * g


def _x(seed=0):
    return torch.rand(6, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(seed)) * 4 - 2


@pytest.mark.parametrize("levels", [100, 1000, 2000, 1024])
def test_quantizer_with_straight_through_backward_is_an_undeclared_estimator(levels):
    x = _x()
    # Hand count: across +-1e-3 the 1,000-level grid moves by exactly 2 points (quotient 1, the
    # straight-through gradient), so the old steps could not tell the quantizer from noise.
    q = _quantizer(levels)
    if levels == 1000:
        h = 1e-3
        quotient = (q.apply(x + h) - q.apply(x - h)) / (2 * h)
        torch.testing.assert_close(quotient, torch.ones_like(x))
    report = gradsmith.check(q, x)
    assert not report.passed, report
    assert "undeclared-estimator" in report.codes("error"), report


def test_no_retry_step_is_a_whole_number_of_grid_half_spacings():
    for levels in (10, 100, 1000, 2000, 10000, 256, 1024, 2048, 4096):
        for h in numerics.RETRY_STEPS:
            points = 2 * h * levels
            assert abs(points - round(points)) > 1e-3 * max(points, 1.0), (levels, h)


@pytest.mark.parametrize("levels", [1000, 2000])
def test_quantizer_with_a_wrong_backward_still_fails(levels):
    report = gradsmith.check(_quantizer(levels, scale=3.0), _x(1))
    assert not report.passed, report


def test_smooth_correct_functions_still_pass():
    for fn, ref in ((Float32Sin, torch.sin), (Cube, lambda t: t ** 3)):
        x = _x(2)
        xl = x.clone().requires_grad_(True)
        fn.apply(xl).sum().backward()
        xr = x.clone().requires_grad_(True)
        ref(xr).sum().backward()
        torch.testing.assert_close(xl.grad, xr.grad)
        report = gradsmith.check(fn, x)
        assert report.passed, report
