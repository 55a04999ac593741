"""A sign a guard states is where the inputs are made (issue 18, quantlib).

Reduced cases, written here, of a quantizer helper that asserts its lower clipping bound is
not positive (``torch._assert(torch.all(clip_lo <= 0), "... is not negative")``) and of a
forward that raises when a scale is negative. Zero-config made both ``randn`` (SKIP: the
guard fired on every layout).
"""

from __future__ import annotations

import math

import torch
from torch.autograd import Function

import gradsmith
from gradsmith.discovery import Synthesized, synthesize
from gradsmith.discovery.hints import forward_hints


class MirrorRoot(Function):
    """sqrt(-lo), written for lo <= 0."""

    @staticmethod
    def forward(ctx, clip_lo):
        torch._assert(torch.all(clip_lo <= 0), "clip_lo is not negative: everything breaks")
        ctx.save_for_backward(clip_lo)
        return torch.sqrt(-clip_lo)

    @staticmethod
    def backward(ctx, g):
        (lo,) = ctx.saved_tensors
        return -0.5 * g / torch.sqrt(-lo)


class MirrorRootWrongSign(MirrorRoot):
    @staticmethod
    def backward(ctx, g):
        (lo,) = ctx.saved_tensors
        return 0.5 * g / torch.sqrt(-lo)         # bug: the chain rule's minus is lost


class PositiveScale(Function):
    @staticmethod
    def forward(ctx, x, scale):
        if (scale < 0).any():
            raise ValueError("scale must be positive")
        ctx.save_for_backward(x, scale)
        return x * scale

    @staticmethod
    def backward(ctx, g):
        x, scale = ctx.saved_tensors
        return g * scale, g * x


def test_an_asserted_sign_makes_the_values_and_the_check_runs():
    found = synthesize(MirrorRoot)
    assert isinstance(found, Synthesized), found
    (lo,) = found.args
    assert (lo < 0).all() and "a guard states its sign" in found.description
    assert gradsmith.check(MirrorRoot, *found.args).passed
    wrong = gradsmith.check(MirrorRootWrongSign, *found.args)
    assert "gradient-mismatch" in wrong.codes("error")
    # Independent reference: autograd of sqrt(-lo).
    ref_in = lo.detach().clone().requires_grad_()
    (ref,) = torch.autograd.grad(torch.sqrt(-ref_in).sum(), ref_in)
    got_in = lo.detach().clone().requires_grad_()
    (got,) = torch.autograd.grad(MirrorRoot.apply(got_in).sum(), got_in)
    torch.testing.assert_close(got, ref)


def test_a_raising_sign_test_is_read_as_the_values_that_pass():
    hints = forward_hints(PositiveScale.forward, ["x", "scale"])
    assert hints["scale"].domain == (0.0, math.inf) and hints["x"].domain is None
    found = synthesize(PositiveScale)
    assert isinstance(found, Synthesized), found
    x, scale = found.args
    assert (scale > 0).all()
    report = gradsmith.check(PositiveScale, *found.args)
    assert report.passed, report.codes("error")
    # Independent reference: autograd of x * scale.
    xr, sr = (t.detach().clone().requires_grad_() for t in (x, scale))
    ref = torch.autograd.grad((xr * sr).sum(), (xr, sr))
    xg, sg = (t.detach().clone().requires_grad_() for t in (x, scale))
    got = torch.autograd.grad(PositiveScale.apply(xg, sg).sum(), (xg, sg))
    torch.testing.assert_close(got, ref)
