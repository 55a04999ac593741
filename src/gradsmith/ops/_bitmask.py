"""Bit-packed boolean masks: 1 bit per element instead of torch.bool's 1 byte.

Written with plain tensor ops (no numpy), so packing inside ``setup_context`` and unpacking in
``backward`` keep working under ``torch.func.vmap`` (shapes are the per-sample shapes) and
``torch.compile``.
"""

from __future__ import annotations

import math

import torch

_BITS = 8


def pack_mask(mask: torch.Tensor) -> torch.Tensor:
    """Pack a boolean tensor into ``ceil(numel / 8)`` uint8 bytes (little-endian bit order).

    Example:
        >>> m = torch.tensor([True, False, True, True, False, False, False, False, True])
        >>> pack_mask(m)
        tensor([13,  1], dtype=torch.uint8)
        >>> torch.equal(unpack_mask(pack_mask(m), m.shape), m)
        True
    """
    flat = mask.reshape(-1)
    pad = (-flat.numel()) % _BITS
    if pad:
        flat = torch.cat([flat, flat.new_zeros(pad)])
    weights = torch.tensor([1 << i for i in range(_BITS)], dtype=torch.uint8,
                           device=mask.device)
    # Distinct powers of two sum to at most 255: the uint8 sum cannot overflow.
    return (flat.reshape(-1, _BITS).to(torch.uint8) * weights).sum(-1, dtype=torch.uint8)


# Row b holds the 8 bits of byte b: unpacking is one gather instead of shift, and, convert.
_TABLE = ((torch.arange(256).unsqueeze(-1) >> torch.arange(_BITS)) & 1).bool()


def unpack_mask(packed: torch.Tensor, shape: torch.Size | tuple[int, ...]) -> torch.Tensor:
    """Inverse of :func:`pack_mask`: the boolean tensor of ``shape``."""
    bits = _TABLE.to(packed.device).index_select(0, packed.long())
    return bits.reshape(-1)[: math.prod(shape)].reshape(shape)
