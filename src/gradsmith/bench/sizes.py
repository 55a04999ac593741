"""Realistic sizes for synthesised bench inputs: repeat them along their batch dimension.

Input synthesis finds the smallest arguments a Function accepts (a ``3 x 4`` tensor), which
time Python overhead, not the Function. ``gradsmith bench`` with no registered example grows
them: every tensor whose first dimension is the first tensor's (the batch) is repeated along
it, 4x at a time, while one forward+backward still runs and takes under a quarter of a second
at the new size, and the largest input stays within about a million elements (the tutorials'
size). A Function whose cost grows faster than its batch (pairwise over rows) stops at the last
size that was fast. Repeating keeps
each row's values, so constraints the synthesis met per row (a simplex, a sorted row, a
positive scale) still hold; dimensions other than the batch are left as found.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from gradsmith.bench.timing import forward_backward

__all__ = ["TARGET_ELEMENTS", "grow_batch"]

TARGET_ELEMENTS = 1 << 20
_STEP = 4
_SLOW_S = 0.25


def _batch_mask(args: tuple) -> list[bool]:
    """Which arguments share the first tensor's first dimension (the batch)."""
    first = next((a for a in args if isinstance(a, torch.Tensor) and a.dim() >= 1), None)
    if first is None:
        return [False] * len(args)
    return [isinstance(a, torch.Tensor) and a.dim() >= 1 and a.shape[0] == first.shape[0]
            for a in args]


def _repeated(args: tuple, batch: list[bool], factor: int) -> tuple:
    return tuple(a.detach().repeat(factor, *[1] * (a.dim() - 1)).requires_grad_(a.requires_grad)
                 if grow else a for a, grow in zip(args, batch))


def grow_batch(op: Callable[..., Any], args: tuple,
               target: int = TARGET_ELEMENTS) -> tuple[tuple, int]:
    """``args`` repeated along their batch dimension as far as ``op`` allows (see the module
    docstring), and the factor used (1: left as they were).

    Example:
        >>> x = torch.randn(3, 4, requires_grad=True)
        >>> grown, factor = grow_batch(torch.tanh, (x,), target=1000)
        >>> factor, tuple(grown[0].shape)
        (64, (192, 4))
    """
    batch = _batch_mask(args)
    if not any(batch):
        return args, 1
    largest = max(a.numel() for a, b in zip(args, batch) if b)
    best, factor = args, 1
    while largest * factor * _STEP <= target:
        grown = _repeated(args, batch, factor * _STEP)
        start = time.perf_counter()
        try:
            forward_backward(op, grown)
        except Exception:  # noqa: BLE001 - user code: this size is not accepted, keep the last
            break
        if time.perf_counter() - start > _SLOW_S:
            break  # too slow at this size (a cost that grows faster than the batch): keep the last
        for a in grown:  # the probe's gradients are not part of the inputs
            if isinstance(a, torch.Tensor):
                a.grad = None
        best, factor = grown, factor * _STEP
    return best, factor
