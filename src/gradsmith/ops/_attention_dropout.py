"""Counter-based dropout masks for attention, regenerated exactly in the backward.

A keep decision is a pure function of ``(seed, global row, key column)``: a 32-bit integer hash
(Wellons' ``lowbias32``) computed with int64 tensor arithmetic. Nothing is stored between forward
and backward but the seed, any key block of the mask can be rebuilt on its own, and the code has
no RNG state, so it runs unchanged under ``torch.compile`` and ``torch.func.vmap``.

``row offset`` shifts the global row index: a data-parallel rank that holds samples
``[b0, b0 + B)`` of a global batch passes ``b0`` and draws exactly the masks a single process
would have drawn for those samples (see ``docs/ops-attention.md``).
"""

from __future__ import annotations

import math

import torch

_M32 = 0xFFFFFFFF
_GOLDEN = 0x9E3779B9


def _mul32(x: torch.Tensor, c: int) -> torch.Tensor:
    """``x * c mod 2**32`` for ``0 <= x < 2**32`` without int64 overflow."""
    if c < 2**31:
        return (x * c) & _M32
    lo, hi = c & 0xFFFF, c >> 16
    return (x * lo + (((x * hi) & 0xFFFF) << 16)) & _M32


def hash32(x: torch.Tensor) -> torch.Tensor:
    """lowbias32 integer hash of int64 values in ``[0, 2**32)``; result in the same range."""
    x = x ^ (x >> 16)
    x = _mul32(x, 0x7FEB352D)
    x = x ^ (x >> 15)
    x = _mul32(x, 0x846CA68B)
    return x ^ (x >> 16)


def threshold(p: float) -> int:
    """Hash values ``>= threshold(p)`` are kept: probability ``1 - p`` up to 2**-32."""
    return min(int(math.floor(p * 2**32)), 2**32)


def row_keys(seed: torch.Tensor, batch_shape: tuple[int, ...], L: int, batch_offset: int,
             device: torch.device) -> torch.Tensor:
    """Per-row hash keys, shape ``(*batch_shape, L, 1)``.

    Args:
        seed: int64 scalar tensor in ``[0, 2**32)``.
        batch_shape: leading dims of the query (their flattened index numbers the rows).
        L: query length.
        batch_offset: index of this tensor's first sample along its first batch dim within the
            global batch.
        device: device of the attention inputs.
    """
    n = math.prod(batch_shape)
    per_sample = (n // batch_shape[0] if batch_shape else 1) * L
    rows = torch.arange(n * L, device=device, dtype=torch.int64) + batch_offset * per_sample
    keys = hash32((rows + seed) & _M32)
    return keys.reshape(*batch_shape, L, 1)


def keep_mask(keys: torch.Tensor, j0: int, j1: int, thresh: int) -> torch.Tensor:
    """Boolean keep mask for key columns ``j0:j1`` of the rows whose keys are given."""
    cols = torch.arange(j0, j1, device=keys.device, dtype=torch.int64)
    x = (keys + ((cols * _GOLDEN) & _M32)) & _M32
    return hash32(x) >= thresh
