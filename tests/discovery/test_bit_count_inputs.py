"""A parameter raised as a power of two is a number of bits: a positive int (issue 18).

CompressAI's ``QReLU`` (reduced here, written anew) clamps to ``[0, 2 ** bit_depth - 1]``.
``bit_depth`` was synthesised as a float tensor (-0.86): the range was empty, forward a
constant, and whatever backward did was never exercised. Read from ``2 ** bit_depth`` (or
``1 << bits``) it is an int, the clamp has both sides, a correct backward passes, a wrong
mask fails and the generalized-Gaussian surrogate outside the range is an estimator.
"""

from __future__ import annotations

import torch
from torch.autograd import Function

import gradsmith
from gradsmith.discovery import Synthesized, synthesize


class ClampBits(Function):
    @staticmethod
    def forward(ctx, x, bit_depth):
        ctx.max_value = 2 ** bit_depth - 1
        ctx.save_for_backward(x)
        return x.clamp(min=0, max=ctx.max_value)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * ((x >= 0) & (x <= ctx.max_value)), None


class ClampBitsWrongMask(Function):
    @staticmethod
    def forward(ctx, x, bit_depth):
        ctx.max_value = 2 ** bit_depth - 1
        ctx.save_for_backward(x)
        return x.clamp(min=0, max=ctx.max_value)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (x <= ctx.max_value), None  # planted: the lower side forgotten


class ShiftBits(Function):
    @staticmethod
    def forward(ctx, x, bits):
        ctx.levels = (1 << bits) - 1
        return x * ctx.levels

    @staticmethod
    def backward(ctx, g):
        return g * ctx.levels, None


class QReLU(Function):
    @staticmethod
    def forward(ctx, x, bit_depth, beta):
        ctx.beta, ctx.max_value = beta, 2 ** bit_depth - 1
        ctx.save_for_backward(x)
        return x.clamp(min=0, max=ctx.max_value)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        surrogate = torch.exp(-(0.99 ** ctx.beta) * torch.abs(2 * x / ctx.max_value - 1)
                              ** ctx.beta) * g
        outside = (x < 0) | (x > ctx.max_value)
        return torch.where(outside, surrogate, g), None, None


def test_a_power_of_two_and_a_shift_make_an_int_number_of_bits():
    for fn in (ClampBits, ShiftBits):
        found = synthesize(fn)
        assert isinstance(found, Synthesized)
        bits = found.args[1]
        assert type(bits) is int and bits >= 1, found.description


def test_the_clamp_has_both_sides_and_a_correct_mask_passes():
    x, bits = synthesize(ClampBits).args
    top = 2 ** bits - 1
    assert bool((x < 0).any()) and bool(((x >= 0) & (x <= top)).any())
    report = gradsmith.check(ClampBits, x, bits)
    assert report.passed, report.summary()
    # backward's gradient is autograd's of the same clamp where forward is differentiable
    x = x.detach().clone().requires_grad_()
    g = torch.randn(x.shape, dtype=x.dtype, generator=torch.Generator().manual_seed(2))
    (got,) = torch.autograd.grad(ClampBits.apply(x, bits), x, g)
    y = x.detach().clone().requires_grad_()
    (want,) = torch.autograd.grad(y.clamp(0, top), y, g)
    torch.testing.assert_close(got, want)


def test_a_forgotten_side_fails():
    report = gradsmith.check(ClampBitsWrongMask, *synthesize(ClampBitsWrongMask).args)
    assert not report.passed and report.codes("error"), report.summary()


def test_the_surrogate_outside_the_range_is_an_estimator():
    report = gradsmith.check(QReLU, *synthesize(QReLU).args)
    assert "undeclared-estimator" in report.codes("error"), report.summary()
