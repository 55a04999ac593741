"""Elementwise square as a custom ``autograd.Function``: correct, and with planted gradient bugs.

Shared by ``tests/checker/test_sensitivity.py`` and ``benchmarks/check_vs_gradcheck.py`` (which
puts this folder on ``sys.path``, as it does for the corpus). Imports nothing but torch: the
benchmark's baseline process measures the memory of torch alone.
"""

from __future__ import annotations

import torch
from torch.autograd import Function

__all__ = ["Square", "SquareOnePercent", "square_one_element"]


class Square(Function):
    """``x * x`` with the correct gradient ``2 x g``."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g


class SquareOnePercent(Square):
    """Gradient 1% too large everywhere (``2.02 x g``)."""

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2.02 * x * g


def square_one_element(index: int | None = None) -> type[Square]:
    """A Square whose gradient is twice the true one at a single flat element.

    Args:
        index: the wrong element; ``None`` puts it at ``numel // 3`` of whatever input comes.

    Returns:
        The Function class.

    Example:
        >>> x = torch.ones(6, requires_grad=True)
        >>> square_one_element(4).apply(x).sum().backward()
        >>> x.grad.tolist()
        [2.0, 2.0, 2.0, 2.0, 4.0, 2.0]
    """

    class SquareOneElement(Square):
        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            grad = 2 * x * g
            scale = torch.ones_like(grad)
            scale.view(-1)[grad.numel() // 3 if index is None else index] = 2
            return grad * scale

    return SquareOneElement
