"""Bit widths read where a signed format's half range or backward's helper uses them (issue 18).

WAGE-style quantisers (reduced here, written anew) raise 2 to ``k - 1`` (``round(x * 2 ** (k -
1))``), and a gradient quantiser only saves its widths (``ctx.save_for_backward(
torch.tensor(kgw), torch.tensor(kdr))``) for backward to hand to another Function's ``apply``.
Both widths were synthesised as float tensors: the grid steps became random per element. Read
as bit widths they are small ints; a quantiser declared with ``intended=`` then passes at them,
and one that quantises at the wrong width still fails.
"""

from __future__ import annotations

import torch
from torch.autograd import Function

import gradsmith
from gradsmith.discovery import Synthesized, synthesize


class HalfRange(Function):
    """Scales by a signed format's half range: exact gradient."""

    @staticmethod
    def forward(ctx, x, k):
        ctx.scale = 2 ** (k - 1)
        return x * ctx.scale

    @staticmethod
    def backward(ctx, g):
        return g * ctx.scale, None


class HalfRangeWrong(Function):
    @staticmethod
    def forward(ctx, x, k):
        ctx.k = k
        return x * 2 ** (k - 1)

    @staticmethod
    def backward(ctx, g):
        return g * 2 ** ctx.k, None  # planted: the full range, twice the gradient


class RoundTo(Function):
    """round(x * 2^(k-1)) / 2^(k-1) with a straight-through backward."""

    @staticmethod
    def forward(ctx, x, k):
        return torch.round(x * 2 ** (k - 1)) / 2 ** (k - 1)

    @staticmethod
    def backward(ctx, g):
        return g, None


round_to = RoundTo.apply


def _quantized(g, k):
    return torch.round(g * 2 ** (k - 1)) / 2 ** (k - 1)


class QuantizeGrad(Function):
    """Identity forward; backward quantises the gradient at the saved width (via apply)."""

    @staticmethod
    def forward(ctx, x, kg):
        ctx.save_for_backward(torch.tensor(kg))
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        (kg,) = ctx.saved_tensors
        return round_to(g, kg), None


class QuantizeGradWrongWidth(Function):
    @staticmethod
    def forward(ctx, x, kg):
        ctx.save_for_backward(torch.tensor(kg))
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        (kg,) = ctx.saved_tensors
        return round_to(g, kg + 3), None  # planted: three more bits than declared


def halve_to(g, k):
    return torch.round(g * 2 ** (k - 1)) / 2 ** (k - 1)


class QuantizeGradPlain(Function):
    """The same through a plain module-level function."""

    @staticmethod
    def forward(ctx, x, kg):
        ctx.save_for_backward(torch.tensor(kg))
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        (kg,) = ctx.saved_tensors
        return halve_to(g, kg), None


def _width(fn):
    found = synthesize(fn)
    assert isinstance(found, Synthesized), found
    k = found.args[1]
    assert type(k) is int and k >= 1, found.description
    return found.args


def test_a_half_range_exponent_is_an_int_width_and_exact_gradients_pass():
    x, k = _width(HalfRange)
    report = gradsmith.check(HalfRange, x, k)
    assert report.passed, report.summary()
    x = x.detach().clone().requires_grad_()
    (got,) = torch.autograd.grad(HalfRange.apply(x, k).sum(), x)
    torch.testing.assert_close(got, torch.full_like(x, 2.0 ** (k - 1)))  # closed form


def test_a_planted_full_range_gradient_fails():
    report = gradsmith.check(HalfRangeWrong, *_width(HalfRangeWrong))
    assert not report.passed and report.codes("error"), report.summary()


def test_widths_saved_for_a_helper_in_backward_are_ints():
    for fn in (QuantizeGrad, QuantizeGradPlain, QuantizeGradWrongWidth):
        _width(fn)


def test_a_declared_gradient_quantiser_passes_and_a_wrong_width_fails():
    def intended(x, kg, grad):
        return _quantized(grad, kg), None

    for fn in (QuantizeGrad, QuantizeGradPlain):
        report = gradsmith.check(fn, *_width(fn), intended=intended)
        assert report.passed, report.summary()
    wrong = gradsmith.check(QuantizeGradWrongWidth, *_width(QuantizeGradWrongWidth),
                            intended=intended)
    assert not wrong.passed and wrong.codes("error"), wrong.summary()
    undeclared = gradsmith.check(QuantizeGrad, *_width(QuantizeGrad))
    assert not undeclared.passed, undeclared.summary()
