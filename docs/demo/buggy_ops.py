"""The classic mistakes from the tutorials, for demonstrating gradsmith's reports.

Every Function here is WRONG on purpose: ``gradsmith check docs/demo/buggy_ops.py`` fails each
one and says why; ``gradsmith lint docs/demo/buggy_ops.py`` finds most of them without running.
"""

import torch
from torch.autograd import Function

import gradsmith


@gradsmith.example(lambda: (torch.randn(6, 4), torch.randn(5, 4)))
class LinearNoTranspose(Function):
    """y = x @ W.T, but the weight gradient forgets the transpose of the product."""

    @staticmethod
    def forward(ctx, x, weight):
        ctx.save_for_backward(x, weight)
        return x @ weight.t()

    @staticmethod
    def backward(ctx, grad_out):
        x, weight = ctx.saved_tensors
        return grad_out @ weight, (x.t() @ grad_out).t().flip(0)


@gradsmith.example(lambda: (torch.randn(10),))
class ScaleGradOutputInPlace(Function):
    """y = 2 x, computed by scaling grad_output in place: corrupts other branches' gradients."""

    @staticmethod
    def forward(ctx, x):
        return 2 * x

    @staticmethod
    def backward(ctx, grad_out):
        grad_out *= 2
        return grad_out


@gradsmith.example(lambda: (torch.randn(10),))
class DetachedSquare(Function):
    """y = x^2 with .detach() in backward: first derivative right, second silently zero
    (a double-backward-unsupported warning; an error with --require second-order)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad_out):
        (x,) = ctx.saved_tensors
        return 2 * x.detach() * grad_out
