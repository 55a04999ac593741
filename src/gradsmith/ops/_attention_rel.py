"""Relative position bias in compact form for the blockwise attention kernels.

``rel`` has shape ``(..., N)`` with ``N = L + S - 1``; entry ``t`` is added to every score
``(i, j)`` with ``j - i = t - (L - 1)``. The kernels never build the dense ``(..., L, S)`` bias:
they read each score tile from a *skewed table*

    ``table[..., b, c] = rel[..., N - 1 - b + c]``    shape ``(..., N, w)``, ``w`` = key-block width

in which the bias of query rows ``r0:L`` against keys ``j0:j0 + w'`` is the plain slice
``table[..., S - 1 - j0 + r0 : S - 1 - j0 + L, :w']`` (check: row ``b = S - 1 - j0 + i``, column
``c = j - j0`` reads ``rel[L - 1 + j - i]``). So a tile costs what a tile of a dense bias costs,
a slice and one add, with no per-tile index tensor or gather; the table itself is built once per
pass from an ``unfold`` view (``O(N w)`` per head, 8 MiB at H = 4, L = S = 1024, w = 256) and is
never saved.

The backward adds each tile's score gradient, summed over the batch dims that ``rel`` does not
have, into the same slice of a table-shaped gradient, then folds that table back to ``(..., N)``
by summing along its diagonals (:func:`rel_grad`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def rel_table(rel: torch.Tensor, width: int, dtype: torch.dtype) -> torch.Tensor:
    """The skewed table ``(..., N, width)`` of ``rel (..., N)`` in ``dtype``.

    Args:
        rel: compact relative bias, last dim ``N = L + S - 1``.
        width: widest key block the kernels will ask for.
        dtype: the score dtype (the accumulation dtype of the kernels).

    Returns:
        A contiguous tensor ``t`` with ``t[..., b, c] = rel[..., N - 1 - b + c]`` (0 past the end).

    Example:
        >>> rel_table(torch.arange(4.0), 2, torch.float32)
        tensor([[3., 0.],
                [2., 3.],
                [1., 2.],
                [0., 1.]])
    """
    padded = F.pad(rel.to(dtype), (0, width - 1))
    return padded.unfold(-1, width, 1).flip(-2).contiguous()


def rel_rows(S: int, L: int, r0: int, j0: int) -> tuple[int, int]:
    """Table rows ``(b0, b1)`` holding the bias of query rows ``r0:L`` against keys from ``j0``."""
    return S - 1 - j0 + r0, S - 1 - j0 + L


def rel_tile(table: torch.Tensor, S: int, L: int, r0: int, j0: int, j1: int) -> torch.Tensor:
    """Bias of query rows ``r0:L`` against keys ``j0:j1``, a view of the table."""
    b0, b1 = rel_rows(S, L, r0, j0)
    return table[..., b0:b1, : j1 - j0]


def add_tile_grad(dtable, ds, rel_shape, S, L, r0, j0, inplace):
    """Add a ``(..., L - r0, w)`` score gradient tile into the table-shaped gradient ``dtable``.

    The tile is first summed over the batch dims that ``rel`` lacks or has as size 1. Returns
    ``dtable`` (updated in place when ``inplace``; a new tensor otherwise, for vmap and compile).
    """
    lead = tuple(rel_shape[:-1])
    red = ds.sum_to_size((*lead, *ds.shape[-2:]))
    b0, b1 = rel_rows(S, L, r0, j0)
    if inplace:
        dtable[..., b0:b1, : red.shape[-1]].add_(red)
        return dtable
    pad = (0, dtable.shape[-1] - red.shape[-1], b0, dtable.shape[-2] - b1)  # rows: N + w
    return dtable + F.pad(red.to(dtable.dtype), pad)


def zeros_grad_table(table: torch.Tensor) -> torch.Tensor:
    """A zero table-shaped gradient with ``w`` spare zero rows at the bottom (for the fold)."""
    *lead, n, w = table.shape
    return table.new_zeros((*lead, n + w, w))


def rel_grad(dtable: torch.Tensor, n: int, strided: bool = True) -> torch.Tensor:
    """Fold a table-shaped gradient ``(..., N + w, w)`` (rows ``N:`` zero) back to ``(..., N)``.

    ``dtable[..., b, c]`` belongs to ``rel[..., N - 1 - b + c]``, so entry ``t`` is the sum of
    the diagonal ``b - c = N - 1 - t``. Element ``(b' + c, c)`` of the contiguous table sits at
    flat offset ``b' w + c (w + 1)``: with ``strided``, an ``as_strided`` view with strides
    ``(w, w + 1)`` lines the diagonals up as rows (no copy; the spare zero rows keep it in
    bounds). Without (under torch.func transforms, whose batching of ``as_strided`` depends on
    the batch dim's memory layout), the same sum comes from a pad-and-reshape skew of the
    transposed table, which costs a transposing copy.

    Example:
        >>> rel = torch.arange(5.0, requires_grad=True)
        >>> table = rel_table(rel, 3, torch.float32)
        >>> (g,) = torch.autograd.grad(table, rel, torch.ones_like(table))
        >>> dtable = zeros_grad_table(table)
        >>> dtable[:5] = 1.0
        >>> torch.equal(rel_grad(dtable, 5), g), torch.equal(rel_grad(dtable, 5, False), g)
        (True, True)
    """
    w = dtable.shape[-1]
    if strided:
        dtable = dtable.contiguous()
        diag = dtable.as_strided((*dtable.shape[:-2], n, w), (*dtable.stride()[:-2], w, w + 1),
                                 dtable.storage_offset())
        return diag.sum(-1).flip(-1)
    # with a = N - 1 - b, entry t collects the anti-diagonal a + c = t: lay column c of the
    # (w, N) transpose out shifted by c (pad each row by w, flatten, drop the last w values,
    # view as (w, N + w - 1)) so that anti-diagonals become columns
    cols = F.pad(dtable[..., :n, :].flip(-2).transpose(-2, -1), (0, w))  # (..., w, N + w)
    skewed = cols.flatten(-2)[..., : w * (n + w - 1)].unflatten(-1, (w, n + w - 1))
    return skewed.sum(-2)[..., :n]


__all__ = ["add_tile_grad", "rel_grad", "rel_rows", "rel_table", "rel_tile", "zeros_grad_table"]
