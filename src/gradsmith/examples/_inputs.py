"""Deterministic example tensors for the embedded examples (private)."""

from __future__ import annotations

import torch


def randn(*shape: int, seed: int = 0, dtype: torch.dtype = torch.float64,
          requires_grad: bool = True) -> torch.Tensor:
    """A seeded standard-normal tensor (fresh on every call, so checks never share state).

    Example:
        >>> torch.equal(randn(2, 3, seed=1), randn(2, 3, seed=1))
        True
    """
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=generator, dtype=dtype).requires_grad_(requires_grad)
