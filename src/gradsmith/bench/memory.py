"""Exact saved-for-backward bytes, measured with ``torch.autograd.graph.saved_tensors_hooks``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

__all__ = ["saved_bytes"]


def _storage_key(t: torch.Tensor) -> tuple[Any, int] | None:
    try:
        storage = t.untyped_storage()
    except (RuntimeError, NotImplementedError):  # tensors without storage (e.g. sparse, fake)
        return None
    return (t.device, storage.data_ptr()), storage.nbytes()


def saved_bytes(fn: Callable[..., Any], inputs: Sequence[Any]) -> int:
    """Bytes of every distinct storage that autograd saves while running ``fn(*inputs)``.

    Each saved tensor is counted by its whole underlying storage, once: two saved views of one
    buffer (or the same tensor saved twice) count once, and a saved input counts too (it stays
    alive until backward). Nothing is run backward.

    Args:
        fn: the forward to measure.
        inputs: its positional arguments (tensors that require grad, numbers, ...).

    Returns:
        Total bytes held for backward.

    Example:
        >>> x = torch.randn(3, 4, requires_grad=True)
        >>> y = torch.randn(3, 4, requires_grad=True)
        >>> saved_bytes(torch.mul, (x, y))  # x * y saves both factors
        96
    """
    seen: dict[tuple[Any, int], int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        key = _storage_key(t)
        if key is not None:
            seen[key[0]] = key[1]
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn(*inputs)
    return sum(seen.values())
