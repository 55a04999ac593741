"""A buffer forward writes into (``buf.copy_(clip)``) is repaired to the shape written into it.

Reduced from corpus 11b dev (fms-model-optimizer ``SAWBPlusZeroSTE``): a quantiser reads its
clip value from a buffer argument (``if clip <= 0``: one element) and writes the clip it used
back into it (``buf.copy_(clip.unsqueeze(0))``). Synthesis made the buffer (3, 4); repair
made it 0-d from "Boolean value of Tensor ... ambiguous", and stopped at "output with shape []
doesn't match the broadcast shape [1]": a skip.
"""

from __future__ import annotations

import torch
from torch.autograd import Function

import gradsmith
from gradsmith.discovery.synthesize import Synthesized, synthesize


class ScaleByClip(Function):
    """y = x / clip, clip read from (and written back into) a one-element buffer."""

    @staticmethod
    def forward(ctx, x, clip_buffer):
        clip = clip_buffer
        if clip <= 0:  # a sign-flipped buffer: its magnitude
            clip = -clip
        if len(clip.shape) == 0:
            clip = clip.unsqueeze(dim=0)
        clip_buffer.copy_(clip)
        ctx.clip = clip.clone()
        return x / clip

    @staticmethod
    def backward(ctx, g):
        return g / ctx.clip, None


class WrongScaleByClip(ScaleByClip):
    """Planted: multiplies by the clip instead of dividing."""

    @staticmethod
    def backward(ctx, g):
        return g * ctx.clip, None


def test_the_buffer_gets_the_shape_forward_writes_into_it():
    found = synthesize(ScaleByClip)
    assert isinstance(found, Synthesized) and not found.doubt, found
    x, buffer = found.args
    assert buffer.shape == (1,) and "written into" in found.description
    assert gradsmith.check(ScaleByClip, *found.args).passed
    # independent reference: autograd of x / clip, clip as forward picks it
    clip = buffer.abs()  # the buffer holds the clip used, whatever its sign was
    xx = x.detach().clone().requires_grad_()
    g = torch.randn_like(xx)
    (xx / clip).backward(g)
    torch.testing.assert_close(g / clip, xx.grad)


def test_a_planted_wrong_scale_still_fails():
    found = synthesize(WrongScaleByClip)
    assert isinstance(found, Synthesized), found
    report = gradsmith.check(WrongScaleByClip, *found.args)
    assert not report.passed and "gradient-mismatch" in report.codes("error"), report
