"""Exact saved-for-backward bytes, measured with ``torch.autograd.graph.saved_tensors_hooks``."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch

__all__ = ["saved_bytes"]


def _storage_key(t: torch.Tensor) -> tuple[Any, int] | None:
    try:
        storage = t.untyped_storage()
    except (RuntimeError, NotImplementedError):  # tensors without storage (e.g. sparse, fake)
        return None
    return (t.device, storage.data_ptr()), storage.nbytes()


def saved_bytes(fn: Callable[..., Any], inputs: Sequence[Any],
                exclude: Iterable[torch.Tensor] = ()) -> int:
    """Bytes of every distinct storage that autograd saves while running ``fn(*inputs)``.

    Each saved tensor is counted by its whole underlying storage, once: two saved views of one
    buffer (or the same tensor saved twice) count once, and a saved input counts too (it stays
    alive until backward) unless its storage is excluded. Nothing is run backward.

    Args:
        fn: the forward to measure.
        inputs: its positional arguments (tensors that require grad, numbers, ...).
        exclude: tensors whose storages are not counted even when saved, e.g. a network's
            input and parameters, which live anyway (the activation cost alone).

    Returns:
        Total bytes held for backward.

    Example:
        >>> x = torch.randn(3, 4, requires_grad=True)
        >>> y = torch.randn(3, 4, requires_grad=True)
        >>> saved_bytes(torch.mul, (x, y))  # x * y saves both factors
        96
        >>> saved_bytes(torch.mul, (x, y), exclude=[y])
        48
    """
    skip = {key[0] for key in map(_storage_key, exclude) if key is not None}
    seen: dict[tuple[Any, int], int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        key = _storage_key(t)
        if key is not None and key[0] not in skip:
            seen[key[0]] = key[1]
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn(*inputs)
    return sum(seen.values())
