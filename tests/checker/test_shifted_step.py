"""An estimator whose backward ignores the offset that shifts forward's step is not called
checked, and a pasted surrogate does not make it PASS (issue 18, corpus 14b dev:
binarized-neural-networks' ``Sign``, ``sign(x - offset)`` with the window ``|x| < width``).

At the example's offset 0 the clipped surrogate ``x.clamp(-1, 1)`` matched backward and was
printed as checked; pasted, the row passed and hid that the window stays at 0 when the step
moves. The reference here is plain autograd on the Function: moving the input and the offset
together leaves forward unchanged, and an offset-aware window gives the same gradient there.
An offset-aware window and an identity straight-through (which no offset can move) keep their
PASS; a planted wrong backward (three times the window) still FAILs.

Reduced cases written here.
"""

from __future__ import annotations

import torch
from torch.autograd import Function

import gradsmith


class OffsetSign(Function):
    """sign(x - offset), backward window centred at 0 (the defect)."""

    @staticmethod
    def forward(ctx, x, width=1, offset=0.0):
        ctx.save_for_backward(x)
        ctx.width = width
        return torch.sign(x - offset)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (x.abs() < ctx.width).to(g.dtype), None, None


class OffsetSignAware(OffsetSign):
    """The window centred at the step: a function of x - offset."""

    @staticmethod
    def forward(ctx, x, width=1, offset=0.0):
        ctx.save_for_backward(x)
        ctx.width, ctx.offset = width, offset
        return torch.sign(x - offset)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * ((x - ctx.offset).abs() < ctx.width).to(g.dtype), None, None


class OffsetSignWrong(OffsetSignAware):
    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * g * ((x - ctx.offset).abs() < ctx.width).to(g.dtype), None, None


class OffsetSignIdentity(OffsetSign):
    @staticmethod
    def backward(ctx, g):
        return g, None, None


def _x():
    return torch.randn(3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(3),
                       requires_grad=True)


def _grad(fn, x, *args):
    x = x.detach().clone().requires_grad_(True)
    fn.apply(x, *args).sum().backward()
    return x.grad


def test_the_reference_shows_the_window_left_behind():
    x = _x()
    assert torch.equal(OffsetSign.apply(x + 8, 1, 8.0), OffsetSign.apply(x, 1, 0.0))
    assert _grad(OffsetSign, x, 1, 0.0).count_nonzero() > 0
    assert _grad(OffsetSign, x + 8, 1, 8.0).count_nonzero() == 0  # the step is there
    torch.testing.assert_close(_grad(OffsetSignAware, x + 8, 1, 8.0),
                               _grad(OffsetSignAware, x, 1, 0.0))


def test_the_line_is_not_called_checked_and_pasted_it_fails():
    report = gradsmith.check(OffsetSign, _x(), 1, 0.0, compat=False)
    (finding,) = [f for f in report.errors if f.code == "undeclared-estimator"]
    assert not finding.details["verified"]
    assert "offset" in finding.hint and "not checked" in finding.hint
    pasted = gradsmith.check(OffsetSign, _x(), 1, 0.0, compat=False,
                             surrogate=lambda x, width, offset: x.clamp(-1, 1))
    assert not pasted.passed
    assert [f.code for f in pasted.errors] == ["estimator-ignores-shift"]


def test_offset_aware_and_identity_estimators_pass_and_a_wrong_one_fails():
    aware = gradsmith.check(OffsetSignAware, _x(), 1, 0.5, compat=False,
                            surrogate=lambda x, width, offset: (x - offset).clamp(-width, width))
    assert aware.passed, aware.errors
    identity = gradsmith.check(OffsetSignIdentity, _x(), 1, 0.5, compat=False,
                               surrogate=lambda x, width, offset: x)
    assert identity.passed, identity.errors
    wrong = gradsmith.check(OffsetSignWrong, _x(), 1, 0.5, compat=False,
                            surrogate=lambda x, width, offset: (x - offset).clamp(-width, width))
    assert not wrong.passed
    assert "estimator-ignores-shift" not in [f.code for f in wrong.errors]


class HardArgmaxTemperature(Function):
    """One-hot of argmax(x / tau) along the last dim with a straight-through softmax gradient:
    shifting x uniformly moves nothing, so tau is no step position (gradsmith's own hard
    gumbel-softmax met this)."""

    @staticmethod
    def forward(ctx, x, tau=0.5):
        soft = torch.softmax(x / tau, -1)
        ctx.save_for_backward(soft)
        ctx.tau = tau
        return torch.nn.functional.one_hot(soft.argmax(-1), x.shape[-1]).to(x.dtype)

    @staticmethod
    def backward(ctx, g):
        (s,) = ctx.saved_tensors
        return s * (g - (g * s).sum(-1, keepdim=True)) / ctx.tau, None


def test_a_temperature_forward_ignores_alone_is_no_shift():
    x = _x()
    # The reference: moving x uniformly, or tau alone, leaves the one-hot as it was.
    same = HardArgmaxTemperature.apply(x, 0.5)
    assert torch.equal(HardArgmaxTemperature.apply(x + 8, 0.5), same)
    assert torch.equal(HardArgmaxTemperature.apply(x, 8.5), same)
    soft = lambda x, tau: torch.softmax(x / tau, -1)  # noqa: E731
    report = gradsmith.check(HardArgmaxTemperature, x, 0.5, compat=False, surrogate=soft)
    assert "estimator-ignores-shift" not in [f.code for f in report.errors]
    assert report.passed, report.errors
