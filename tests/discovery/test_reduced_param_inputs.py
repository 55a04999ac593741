"""A parameter whose gradient backward returns as ``(g * d).sum((0, 2, 3)).reshape(ctx.shape)``
is per-channel, ``(1, C, 1, 1)``, beside an output-shaped tensor of rank 4 (round 13 task q,
reduced from spiking-network channel-wise quantisers: synthesis gave every tensor (3, 4) and
backward raised ``Dimension out of range`` on every set). Read from what backward returns, not
from names; a plain ``sum(0)`` (no reshape, no keepdim) is left to the layout re-check."""

from __future__ import annotations

import torch

import gradsmith
from gradsmith.discovery.hints import Hint
from gradsmith.discovery.reduced_params import read_reduced
from gradsmith.discovery.synthesize import Synthesized, synthesize


class ChannelGain(torch.autograd.Function):
    """out = x * s with s (1, C, 1, 1); the forward hides the rank behind torch.max."""

    @staticmethod
    def forward(ctx, x, s, learn=True):
        y = torch.max(x, -10 * torch.ones_like(x))
        ctx.save_for_backward(y, s)
        ctx.shape = s.shape
        ctx.learn = learn
        return y * s

    @staticmethod
    def backward(ctx, grad_output):
        y, s = ctx.saved_tensors
        grad_in = grad_output
        if ctx.learn:
            grad_s = (grad_output * y).sum((0, 2, 3)).reshape(ctx.shape)
        else:
            grad_s = None
        return grad_in * s, grad_s, None


class ChannelGainWrong(ChannelGain):  # planted: mean where the sum belongs
    @staticmethod
    def backward(ctx, grad_output):
        y, s = ctx.saved_tensors
        return grad_output * s, (grad_output * y).mean((0, 2, 3)).reshape(ctx.shape), None


class ChannelStep(torch.autograd.Function):
    """A per-channel rounding quantiser with a straight-through backward: an estimator."""

    @staticmethod
    def forward(ctx, feature, step):
        div = feature / step.abs().clamp(min=0.1)
        ctx.save_for_backward(div)
        ctx.qshape = step.shape
        return torch.round(div.clamp(-4, 4)) * step.abs().clamp(min=0.1)

    @staticmethod
    def backward(ctx, grad):
        (div,) = ctx.saved_tensors
        inside = (div.abs() <= 4).float()
        grad_step = (grad * (torch.round(div) - div) * inside).sum((0, 2, 3), keepdim=True)
        return grad * inside, grad_step.view(ctx.qshape)


class RowScale(torch.autograd.Function):  # a weight's per-row step, dims as range()
    @staticmethod
    def forward(ctx, w, a):
        ctx.save_for_backward(w, a)
        return w * a

    @staticmethod
    def backward(ctx, g):
        w, a = ctx.saved_tensors
        return g * a, (g * w).sum(tuple(range(1, 4))).reshape(-1, 1, 1, 1)


class FeatureBias(torch.autograd.Function):  # g.sum(0): a 1-D bias, not read here
    @staticmethod
    def forward(ctx, x, b):
        return x + b

    @staticmethod
    def backward(ctx, g):
        return g, g.sum(0)


def _found(fn) -> Synthesized:
    found = synthesize(fn)
    assert isinstance(found, Synthesized), found
    return found


def test_the_hints_give_the_reduced_parameter_size_one_in_the_reduced_dimensions():
    hints = {"x": Hint(), "s": Hint(), "learn": Hint()}
    read_reduced(ChannelGain, hints)
    assert hints["x"].rank_min == 4
    assert (hints["s"].rank_min, sorted(hints["s"].unit_dims)) == (4, [0, 2, 3])
    rows = {"w": Hint(), "a": Hint()}
    read_reduced(RowScale, rows)
    assert (rows["w"].rank_min, rows["a"].rank_min, sorted(rows["a"].unit_dims)) == (
        4, 4, [1, 2, 3])
    bias = {"x": Hint(), "b": Hint()}
    read_reduced(FeatureBias, bias)
    assert (bias["x"].rank_min, bias["b"].rank_min, bias["b"].unit_dims) == (0, 0, set())


def test_a_per_channel_gain_is_synthesised_per_channel_and_passes():
    found = _found(ChannelGain)
    x, s = found.args[:2]
    assert x.dim() == 4 and s.shape == (1, x.shape[1], 1, 1), found.description
    report = gradsmith.check(ChannelGain, *found.args, compat=False)
    assert report.passed, report.codes("error")
    # Independent reference: autograd of the same product.
    xx, ss = x.detach().clone().requires_grad_(), s.detach().clone().requires_grad_()
    g = torch.randn(x.shape, dtype=x.dtype)
    want = torch.autograd.grad(torch.max(xx, torch.tensor(-10.0, dtype=x.dtype)) * ss,
                               (xx, ss), g)
    got = torch.autograd.grad(ChannelGain.apply(xx, ss), (xx, ss), g)
    for o, r in zip(got, want):
        torch.testing.assert_close(o, r)


def test_the_planted_wrong_reduction_fails():
    found = _found(ChannelGainWrong)
    assert found.args[1].dim() == 4, found.description
    report = gradsmith.check(ChannelGainWrong, *found.args, compat=False)
    assert "gradient-mismatch" in report.codes("error")


def test_a_per_channel_estimator_is_an_estimator_not_a_backward_error():
    found = _found(ChannelStep)
    feature, step = found.args[:2]
    assert feature.dim() == 4 and step.shape == (1, feature.shape[1], 1, 1), found.description
    report = gradsmith.check(ChannelStep, *found.args, compat=False)
    assert "backward-error" not in report.codes("error"), report.codes("error")
    assert "undeclared-estimator" in report.codes("error")
