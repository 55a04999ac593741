"""Reductions along a dimension, with ``keepdim``: the gradient is expanded back.

Backward receives a gradient shaped like the reduced output. Without ``keepdim`` the reduced
dimension is gone, so it is put back (``unsqueeze(dim)``) before expanding to the input's
shape; forgetting this broadcasts along the wrong axis whenever two sizes coincide.
"""

from __future__ import annotations

import torch
from torch.autograd import Function

from gradsmith._example import example
from gradsmith.examples._inputs import randn


def _restore(grad: torch.Tensor, shape: torch.Size, dim: int, keepdim: bool) -> torch.Tensor:
    """Expand a reduced gradient back to ``shape``."""
    return (grad if keepdim else grad.unsqueeze(dim)).expand(shape)


@example(lambda: (randn(3, 4), 1), name="dim 1")
@example(lambda: (randn(2, 3, 4), 0, True), name="dim 0, keepdim")
class Sum(Function):
    """``y = x.sum(dim, keepdim)``.

    Gradient: every element of the reduced slice gets the slice's incoming gradient,
    ``dx = expand(g)``.

    Example:
        >>> Sum.apply(torch.ones(2, 3), 1)
        tensor([3., 3.])
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(input, dim, keepdim=False):
        return input.sum(dim, keepdim=keepdim)

    @staticmethod
    def setup_context(ctx, inputs, output):
        input, dim, *rest = inputs
        ctx.shape, ctx.dim, ctx.keepdim = input.shape, dim, bool(rest and rest[0])

    @staticmethod
    def backward(ctx, grad):
        return _restore(grad, ctx.shape, ctx.dim, ctx.keepdim), None, None


@example(lambda: (randn(3, 4), -1), name="dim -1")
@example(lambda: (randn(2, 3, 4), 1, True), name="dim 1, keepdim")
class Mean(Function):
    """``y = x.mean(dim, keepdim)``.

    Gradient: ``dx = expand(g) / n`` with ``n = x.shape[dim]``, the number of averaged elements.

    Example:
        >>> Mean.apply(torch.tensor([[1., 3.]]), 1)
        tensor([2.])
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(input, dim, keepdim=False):
        return input.mean(dim, keepdim=keepdim)

    @staticmethod
    def setup_context(ctx, inputs, output):
        input, dim, *rest = inputs
        ctx.shape, ctx.dim, ctx.keepdim = input.shape, dim, bool(rest and rest[0])

    @staticmethod
    def backward(ctx, grad):
        n = ctx.shape[ctx.dim]
        return _restore(grad, ctx.shape, ctx.dim, ctx.keepdim) / n, None, None


@example(lambda: (randn(3, 5), 1), name="dim 1")
@example(lambda: (randn(4, 3, 2), 0, True), name="dim 0, keepdim")
class Max(Function):
    """``values, indices = x.max(dim, keepdim)``; the indices are not differentiable.

    Gradient: the incoming gradient goes to the arg-max element of each slice, zero elsewhere
    (``scatter`` along ``dim``). The indices output is marked non-differentiable.

    Example:
        >>> Max.apply(torch.tensor([[1., 5., 2.]]), 1)
        (tensor([5.]), tensor([1]))
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(input, dim, keepdim=False):
        values, indices = input.max(dim, keepdim=keepdim)
        return values, indices

    @staticmethod
    def setup_context(ctx, inputs, output):
        input, dim, *rest = inputs
        ctx.mark_non_differentiable(output[1])
        ctx.save_for_backward(output[1])
        ctx.shape, ctx.dim, ctx.keepdim = input.shape, dim, bool(rest and rest[0])

    @staticmethod
    def backward(ctx, grad_values, grad_indices):
        (indices,) = ctx.saved_tensors
        if not ctx.keepdim:
            grad_values, indices = grad_values.unsqueeze(ctx.dim), indices.unsqueeze(ctx.dim)
        grad_input = grad_values.new_zeros(ctx.shape).scatter(ctx.dim, indices, grad_values)
        return grad_input, None, None


@example(lambda: (randn(4, 5), 1), name="dim 1")
@example(lambda: (randn(3, 4) * 50, 0), name="large values")
class LogSumExp(Function):
    """``y = log(sum_i exp(x_i))`` along ``dim``, stable for large ``x`` (max trick).

    Gradient: ``dx = g * softmax(x) = g * exp(x - y)``. It is computed in backward from the
    saved input and output rather than saving the softmax: a saved intermediate would make
    second derivatives silently wrong (autograd cannot differentiate through it).

    Example:
        >>> LogSumExp.apply(torch.tensor([[0., 0.]]), 1)
        tensor([0.6931])
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(input, dim):
        peak = input.amax(dim, keepdim=True)
        return (input - peak).exp().sum(dim, keepdim=True).log().add(peak).squeeze(dim)

    @staticmethod
    def setup_context(ctx, inputs, output):
        input, dim = inputs
        ctx.save_for_backward(input, output)
        ctx.dim = dim

    @staticmethod
    def backward(ctx, grad):
        input, output = ctx.saved_tensors
        softmax = (input - output.unsqueeze(ctx.dim)).exp()
        return grad.unsqueeze(ctx.dim) * softmax, None
