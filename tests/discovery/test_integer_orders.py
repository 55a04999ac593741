"""An argument forward uses as an exponent or a harmonic order, for which backward returns no
gradient (``None``, ``torch.zeros_like(k)``), is synthesised integer-valued and not
differentiated (issue 18: kymatio's phase harmonics ``|z| e^{ik arg z}`` got a differentiable
float ``k`` and a false ``gradient-mismatch``). A backward that returns zeros for an input
used as a plain factor is wrong and still fails; a planted wrong gradient still fails.

Reduced cases written here; references are autograd of the same expression.
"""

from __future__ import annotations

import pytest
import torch
from torch.autograd import Function

import gradsmith
from gradsmith.checkrun.sets import merge as _merge
from gradsmith.checkrun.sets import variant_checks as _variant_checks
from gradsmith.discovery.orders import integer_orders
from gradsmith.discovery.synthesize import Synthesized, synthesize


def _zero_config(fn):
    """The report ``gradsmith check`` builds on synthesised inputs (first set, then each
    variant's findings merged in, as :func:`gradsmith.checkrun.sets.check_sets`)."""
    found = synthesize(fn)
    assert isinstance(found, Synthesized), found
    report = gradsmith.check(fn, *found.args)
    for index, variant in enumerate(found.variants, start=1):
        _merge(report, index, variant.change,
               gradsmith.check(fn, *variant.args, checks=_variant_checks({})))
    return found, report


class IntPower(Function):
    """x ** k for an integer power k, given no gradient."""

    @staticmethod
    def forward(ctx, x, k):
        ctx.save_for_backward(x, k)
        return x ** k

    @staticmethod
    def backward(ctx, g):
        x, k = ctx.saved_tensors
        return g * k * x ** (k - 1), torch.zeros_like(k)


class IntPowerWrongGrad(IntPower):
    """Planted: the factor k missing from the gradient."""

    @staticmethod
    def backward(ctx, g):
        x, k = ctx.saved_tensors
        return g * x ** (k - 1), torch.zeros_like(k)


class Harmonic(Function):
    """(r cos k theta, r sin k theta) of (x, y) pairs, k orders broadcast against the phase:
    continuous in (x, y) only for integer k; backward gives k no gradient (None)."""

    @staticmethod
    def forward(ctx, z, k):
        x, y = z[..., 0], z[..., 1]
        r = torch.sqrt(x * x + y * y)
        theta = torch.atan2(y, x)
        ktheta = k * theta
        ctx.save_for_backward(z, k)
        return torch.stack((r * torch.cos(ktheta), r * torch.sin(ktheta)), -1)

    @staticmethod
    def backward(ctx, g):
        z, k = ctx.saved_tensors
        with torch.enable_grad():
            zz = z.detach().requires_grad_()
            x, y = zz[..., 0], zz[..., 1]
            r, theta = torch.sqrt(x * x + y * y), torch.atan2(y, x)
            out = torch.stack((r * torch.cos(k * theta), r * torch.sin(k * theta)), -1)
            (gz,) = torch.autograd.grad(out, zz, g)
        return gz, None


class FactorZeroed(Function):
    """x * w with the gradient of w wrongly zero: w is a plain factor, not an order."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * w, torch.zeros_like(w)


class LearnedPower(Function):
    """x ** p with p learned: backward differentiates p, so p stays a differentiable float."""

    @staticmethod
    def forward(ctx, x, p):
        ctx.save_for_backward(x, p)
        return x ** p

    @staticmethod
    def backward(ctx, g):
        x, p = ctx.saved_tensors
        return g * p * x ** (p - 1), (g * x ** p * torch.log(x)).sum().reshape(p.shape)


def test_orders_are_read_from_the_code():
    assert integer_orders(IntPower) == {"k": "an exponent"}
    assert integer_orders(Harmonic) == {"k": "a multiple of an angle (a harmonic order)"}
    assert integer_orders(FactorZeroed) == {}  # a plain factor given zeros: not an order
    assert integer_orders(LearnedPower) == {}  # backward differentiates it


@pytest.mark.parametrize(("fn", "reference"), [
    (IntPower, lambda x, k: x ** k),
    (Harmonic, lambda z, k: torch.stack(
        (z.norm(dim=-1) * torch.cos(k * torch.atan2(z[..., 1], z[..., 0])),
         z.norm(dim=-1) * torch.sin(k * torch.atan2(z[..., 1], z[..., 0]))), -1)),
])
def test_an_order_given_no_gradient_is_an_integer_constant_and_the_function_passes(fn, reference):
    found, report = _zero_config(fn)
    first, k = found.args
    assert not k.requires_grad and torch.equal(k, k.round()) and (k >= 2).all()
    assert "k: float64" in found.description and "integer-valued, no grad" in found.description
    assert report.passed, report
    x = first.detach().requires_grad_()
    g = torch.randn(fn.apply(x, k).shape, dtype=torch.float64,
                    generator=torch.Generator().manual_seed(3))
    torch.testing.assert_close(torch.autograd.grad(fn.apply(x, k), x, g),
                               torch.autograd.grad(reference(x, k), x, g))


def test_a_planted_wrong_gradient_still_fails_with_an_integer_order():
    found, report = _zero_config(IntPowerWrongGrad)
    assert not found.args[1].requires_grad
    assert "gradient-mismatch" in report.codes("error")


def test_zeros_for_a_continuous_input_still_fail():
    found, report = _zero_config(FactorZeroed)
    assert found.args[1].requires_grad and "integer-valued" not in found.description
    assert "gradient-mismatch" in report.codes("error")
    assert any(f.input == "w" for f in report.findings if f.code == "gradient-mismatch")


def test_an_exponent_backward_differentiates_stays_a_differentiable_float():
    found, report = _zero_config(LearnedPower)
    assert found.args[1].requires_grad and "integer-valued" not in found.description
    assert report.passed, report
