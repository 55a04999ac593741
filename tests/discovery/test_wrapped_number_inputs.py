"""A parameter forward lists in a tensor it builds (``torch.tensor([width])``) and backward
returns no gradient for is a Python number: synthesised as a tensor of random sign, a width
made negative gave a correct Function a false gradient mismatch."""

from __future__ import annotations

import torch
import torch.nn.functional as F

import gradsmith
from gradsmith.discovery.synthesize import Synthesized, synthesize


class ScaledHuber(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, width):
        w = torch.tensor([width], dtype=x.dtype)
        ctx.save_for_backward(x, w)
        return torch.where(x.abs() < width, x * x / (2 * width), x.abs() - width / 2)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        width = w[0].item()
        return g * x.clamp(-width, width) / width, None


class ScaledHuberWrong(torch.autograd.Function):  # planted: the 1/width factor dropped
    @staticmethod
    def forward(ctx, x, width):
        w = torch.tensor([width], dtype=x.dtype)
        ctx.save_for_backward(x, w)
        return torch.where(x.abs() < width, x * x / (2 * width), x.abs() - width / 2)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        width = w[0].item()
        return g * x.clamp(-width, width), None


def _found(fn) -> Synthesized:
    found = synthesize(fn)
    assert isinstance(found, Synthesized), found
    return found


def test_a_number_wrapped_in_a_tensor_is_a_positive_python_float_and_passes():
    found = _found(ScaledHuber)
    x, width = found.args
    assert isinstance(width, float) and width > 0, found.description
    assert gradsmith.check(ScaledHuber, *found.args, compat=False).passed
    # Independent reference: autograd of torch's Huber loss divided by its delta.
    xx = x.detach().clone().requires_grad_()
    (F.huber_loss(xx, torch.zeros_like(xx), reduction="sum", delta=width) / width).backward()
    (got,) = torch.autograd.grad(ScaledHuber.apply(x, width).sum(), x)
    torch.testing.assert_close(got, xx.grad)


def test_the_planted_wrong_backward_still_fails():
    found = _found(ScaledHuberWrong)
    assert isinstance(found.args[1], float)
    report = gradsmith.check(ScaledHuberWrong, *found.args, compat=False)
    assert "gradient-mismatch" in report.codes("error")
