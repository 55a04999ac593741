"""Small helpers shared by the part-1 ops: precision, broadcasting and parameters.

All of them are built from differentiable torch ops, so a backward that uses them stays
differentiable (double backward remains correct).
"""

from __future__ import annotations

from typing import Any

import torch

from gradsmith._errors import GradsmithError
from gradsmith.ops._validate import check_floating, check_number

_LOW_PRECISION = (torch.bfloat16, torch.float16)


def opmath(t: torch.Tensor) -> torch.Tensor:
    """Upcast bfloat16/float16 to float32 for intermediate math, as PyTorch's own kernels do."""
    return t.float() if t.dtype in _LOW_PRECISION else t


def reduce_to(grad: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """Sum a broadcast gradient back to ``like``'s shape and cast it to ``like``'s dtype."""
    if grad.shape != like.shape:
        grad = grad.sum_to_size(like.shape)
    return grad.to(like.dtype)


def scalar_or_tensor(fn: str, name: str, value: Any, x: torch.Tensor) -> float | torch.Tensor:
    """Validate a parameter that is a Python number or a floating tensor broadcastable to ``x``.

    A tensor may require grad (e.g. a learnable ``beta``); broadcasting must not change ``x``'s
    shape, so the op's output always has the shape of its input.
    """
    if isinstance(value, torch.Tensor) and (value.dim() > 0 or value.requires_grad):
        check_floating(fn, name, value)
        try:
            shape = torch.broadcast_shapes(value.shape, x.shape)
        except RuntimeError:
            shape = None
        if shape != x.shape:
            raise GradsmithError(
                f"{fn}: {name} of shape {tuple(value.shape)} must broadcast to x's shape "
                f"{tuple(x.shape)} without enlarging it; reshape {name} (e.g. to a scalar or to "
                f"one value per channel with trailing singleton dims)"
            )
        return value
    return check_number(fn, name, value)


def example_input(*shape: int, scale: float = 1.0, shift: float = 0.0,
                  seed: int = 0) -> torch.Tensor:
    """Deterministic float64 input for registered examples: ``randn(shape) * scale + shift``."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, dtype=torch.float64, generator=gen) * scale + shift
