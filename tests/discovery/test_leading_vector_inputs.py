"""A parameter forward spreads one value per leading index of another tensor
(``scale[:, None, None, None]``, ``scale.view(-1, 1, 1, 1)``) is 1-D beside a tensor of that
rank: given the same shape as the other, the product broadcast to a 5-D tensor."""

from __future__ import annotations

import torch

import gradsmith
from gradsmith.discovery.synthesize import Synthesized, synthesize


class ChannelScale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, w, scale):
        ctx.save_for_backward(w, scale)
        return w * scale[:, None, None, None]

    @staticmethod
    def backward(ctx, g):
        w, scale = ctx.saved_tensors
        return g * scale[:, None, None, None], (g * w).sum((1, 2, 3))


class ChannelScaleWrong(torch.autograd.Function):  # planted: mean where the sum belongs
    @staticmethod
    def forward(ctx, w, scale):
        ctx.save_for_backward(w, scale)
        return w * scale[:, None, None, None]

    @staticmethod
    def backward(ctx, g):
        w, scale = ctx.saved_tensors
        return g * scale[:, None, None, None], (g * w).mean((1, 2, 3))


class RowShift(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, shift):
        return x + shift.view(-1, 1)

    @staticmethod
    def backward(ctx, g):
        return g, g.sum(1)


def _found(fn) -> Synthesized:
    found = synthesize(fn)
    assert isinstance(found, Synthesized), found
    return found


def test_a_per_channel_scale_is_one_value_per_row_of_a_4d_tensor_and_passes():
    found = _found(ChannelScale)
    w, scale = found.args
    assert w.dim() == 4 and scale.shape == (w.shape[0],), found.description
    report = gradsmith.check(ChannelScale, *found.args, compat=False)
    assert report.passed, report.codes("error")
    assert "broadcast-grad" not in report.codes("warning")
    # Independent reference: autograd of the same product.
    ww, ss = w.detach().clone().requires_grad_(), scale.detach().clone().requires_grad_()
    g = torch.randn(w.shape, dtype=w.dtype)
    want = torch.autograd.grad(ww * ss.view(-1, 1, 1, 1), (ww, ss), g)
    got = torch.autograd.grad(ChannelScale.apply(ww, ss), (ww, ss), g)
    for o, r in zip(got, want):
        torch.testing.assert_close(o, r)


def test_the_planted_wrong_reduction_fails():
    found = _found(ChannelScaleWrong)
    report = gradsmith.check(ChannelScaleWrong, *found.args, compat=False)
    assert "gradient-mismatch" in report.codes("error")


def test_a_view_to_one_column_is_read_as_one_value_per_row():
    found = _found(RowShift)
    x, shift = found.args
    assert x.dim() == 2 and shift.shape == (x.shape[0],), found.description
    assert gradsmith.check(RowShift, *found.args, compat=False).passed
