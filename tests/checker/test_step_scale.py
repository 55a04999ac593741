"""The finite-difference step follows the input's scale: at 1e12 an absolute step of 1e-6 is
lost in rounding (``x + h == x``) and a correct ``2 * x`` looked like a straight-through
estimator; at 1e-12 it leaves the domain of ``log`` and nothing was compared."""

from __future__ import annotations

import pytest
import torch
from torch.autograd import Function

import gradsmith


def _fn(f, df):
    class Fn(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return f(x)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * df(x)

    return Fn


DOUBLE = _fn(lambda x: 2 * x, lambda x: torch.full_like(x, 2.0))
CUBE = _fn(lambda x: x ** 3, lambda x: 3 * x * x)
LOG = _fn(torch.log, lambda x: 1 / x)
WRONG_DOUBLE = _fn(lambda x: 2 * x, lambda x: torch.full_like(x, 2.02))
WRONG_CUBE = _fn(lambda x: x ** 3, lambda x: 3.03 * x * x)
WRONG_LOG = _fn(torch.log, lambda x: 1 / (2 * x))


def _x(scale: float, n: int = 6) -> torch.Tensor:
    gen = torch.Generator().manual_seed(0)
    return (1 + torch.rand(n, generator=gen, dtype=torch.float64)) * scale


def _agrees_with_autograd(fn, f, x) -> bool:
    """The independent reference: autograd of the same expression."""
    a = x.clone().requires_grad_()
    b = x.clone().requires_grad_()
    (want,) = torch.autograd.grad(f(a).sum(), a)
    (got,) = torch.autograd.grad(fn.apply(b).sum(), b)
    return torch.allclose(got, want, rtol=1e-6, atol=0)


@pytest.mark.parametrize("scale", [1e12, 1e-12, 1.0])
@pytest.mark.parametrize("fn, f", [(DOUBLE, lambda x: 2 * x), (CUBE, lambda x: x ** 3)],
                         ids=["2x", "x^3"])
def test_a_correct_backward_passes_at_any_scale(fn, f, scale):
    x = _x(scale)
    assert _agrees_with_autograd(fn, f, x)
    report = gradsmith.check(fn, x, compat=False)
    assert report.passed, str(report)


@pytest.mark.parametrize("scale", [1e12, 1e-12])
def test_a_wrong_factor_is_a_gradient_mismatch_at_any_scale(scale):
    x = _x(scale)
    assert not _agrees_with_autograd(WRONG_DOUBLE, lambda x: 2 * x, x)
    report = gradsmith.check(WRONG_DOUBLE, x, compat=False)
    assert report.codes("error") == {"gradient-mismatch"}, str(report)


def test_a_wrong_factor_on_a_large_gradient_is_found_at_1e12():
    x = _x(1e12)
    report = gradsmith.check(WRONG_CUBE, x, compat=False)
    assert report.codes("error") == {"gradient-mismatch"}, str(report)


def test_a_large_input_in_probe_mode_follows_the_scale_too():
    x = _x(1e12, n=2000)  # above exact_max: random-direction probes
    assert gradsmith.check(DOUBLE, x, compat=False).passed
    assert not gradsmith.check(WRONG_DOUBLE, x, compat=False).passed


def test_log_at_1e_minus_12_is_compared_with_a_step_inside_its_domain():
    x = _x(1e-12)
    assert _agrees_with_autograd(LOG, torch.log, x)
    good = gradsmith.check(LOG, x, compat=False)
    assert good.passed, str(good)
    assert "nan-numerical" not in good.codes()
    bad = gradsmith.check(WRONG_LOG, x, compat=False)
    assert "gradient-mismatch" in bad.codes("error"), str(bad)
