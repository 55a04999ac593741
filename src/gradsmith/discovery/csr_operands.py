"""Sparse matrices passed in compressed sparse row (CSR) form: values, column indices, row
pointers and a shape (private).

A forward written for CSR operands (``spgemv(ctx, A_shape, A_data, A_col_ind, A_rowptr, x)``,
a product of two such matrices, a triangular solve) needs its parts to agree: ``rowptr`` an
int64 ``(rows + 1,)`` tensor of non-decreasing offsets from 0 to the number of stored
entries, ``col_ind`` int64 column indices (sorted within each row, inside the shape),
``data`` the float values, one per stored entry, and ``shape`` the ``(rows, cols)`` tuple.
Random floats give none of that, and a compiled extension rejects any other kind, so every
layout failed and such a Function was a skip (corpus 12a's numml, nine Functions).

Read, never run: a group is the parameters named ``<prefix>rowptr`` / ``indptr`` /
``crow_indices`` with the ``<prefix>`` parameters naming column indices (``col_ind``,
``indices``, ``col``) and values (``data``, ``values``), and the shape parameter of the same
prefix (or a plain ``shape`` / ``size``); ``torch.sparse_csr_tensor(crow, col, values, size)``
and ``csr_matrix((data, indices, indptr), shape=...)`` in forward's source name them too.
:func:`csr_inputs` builds every group as one small square matrix with a nonzero diagonal
(diagonally dominant, so a solve or factorisation is well posed) and two off-diagonal
entries per row; values differentiable, indices and row pointers int64, fixed. The other
tensors are dense operands with as many rows as the matrix (vectors, else matrices of two
columns), else 0-d tensors (``alpha * A + beta * B`` in a compiled kernel); plain values (``k``, ``alpha``,
``lower``) keep the synthesis plan's. Tried only after every other plan failed, and kept
only where forward runs at both sizes.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from gradsmith.discovery.source import parse

_POINTERS = re.compile(r"^(.*?)(rowptr|row_ptr|indptr|crow_indices|crow|rowptrs)$", re.I)
_COLUMNS = ("col_ind", "col_indices", "colind", "col_idx", "indices", "col", "cols")
_VALUES = ("data", "values", "vals", "val", "nzval")
_SHAPES = ("shape", "size", "dims")
_BUILDERS = {"sparse_csr_tensor", "csr_matrix", "csr_array"}


def csr_groups(forward: Any, names: list[str]) -> list[tuple[str, str, str, str | None]]:
    """The (values, column indices, row pointers, shape) parameter groups of a CSR forward.

    Example:
        >>> def forward(ctx, A_shape, A_data, A_col_ind, A_rowptr, x):
        ...     pass
        >>> csr_groups(forward, ["A_shape", "A_data", "A_col_ind", "A_rowptr", "x"])
        [('A_data', 'A_col_ind', 'A_rowptr', 'A_shape')]
    """
    groups = []
    for name in names:
        match = _POINTERS.match(name)
        if match is None:
            continue
        prefix = match.group(1)
        columns = next((prefix + c for c in _COLUMNS if prefix + c in names), None)
        values = next((prefix + v for v in _VALUES if prefix + v in names), None)
        shape = next((prefix + s for s in _SHAPES if prefix + s in names),
                     next((s for s in _SHAPES if s in names), None))
        if columns and values:
            groups.append((values, columns, name, shape))
    return groups or _built(forward, names)


def _built(forward: Any, names: list[str]) -> list[tuple[str, str, str, str | None]]:
    """Groups forward passes to ``torch.sparse_csr_tensor(crow, col, values, size)`` or
    ``csr_matrix((data, indices, indptr), shape=shape)``."""
    tree = parse(forward)
    found = []
    for node in ast.walk(tree) if tree is not None else ():
        if not (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(
                node.func, "id", "")) in _BUILDERS and node.args):
            continue
        first = node.args[0]
        if isinstance(first, ast.Tuple):  # scipy: (data, indices, indptr)
            parts, size = first.elts, (node.args[1:2] or [None])[0]
            order = (0, 1, 2)
        else:  # torch: crow, col, values[, size]
            parts, size = node.args[:3], (node.args[3:4] or [None])[0]
            order = (2, 1, 0)
        size = next((k.value for k in node.keywords if k.arg in ("shape", "size")), size)
        got = [parts[i].id if i < len(parts) and isinstance(parts[i], ast.Name)
               and parts[i].id in names else None for i in order]
        if None not in got:
            shape = size.id if isinstance(size, ast.Name) and size.id in names else None
            found.append((got[0], got[1], got[2], shape))
    return found


def csr_inputs(call, forward: Any, params: list, seed: int, plan: list | None = None):
    """:class:`~gradsmith.discovery.layout_search.Synthesized` inputs for a forward taking
    CSR operands, or None (no group, or forward does not run on them at both sizes)."""
    from gradsmith.discovery.layout_search import Synthesized
    from gradsmith.discovery.probe import probe
    from gradsmith.discovery.variants import Variant

    names = [p.name for p in params]
    groups = csr_groups(forward, names)
    if not groups:
        return None
    plain = {s.name: s.value for s in plan or () if s.kind == "value" and isinstance(
        s.value, (bool, int, float, str))}
    built = []
    for size in (4, 5):
        for width in (None, 2, 0):  # dense operands: vectors, (rows, 2) matrices, scalars
            args, text = _build(names, groups, size, width, seed, plain)
            if probe(call, args) is True:
                built.append((tuple(args), text))
                break
        else:
            return None
    (args, text), (other, other_text) = built
    return Synthesized(args, text, (Variant(other, other_text, "other sizes: 5 x 5"),), seed)


def csr_matrix(size: int, generator: Any) -> tuple[Any, Any, Any]:
    """A ``size x size`` CSR matrix: the diagonal (3 + U[0, 1)) and two off-diagonal entries
    per row (N(0, 0.5)), column indices sorted: (values float64, col int64, rowptr int64).

    Example:
        >>> import torch
        >>> data, col, rowptr = csr_matrix(4, torch.Generator().manual_seed(0))
        >>> rowptr.tolist()
        [0, 3, 6, 9, 12]
        >>> row0 = col[:3].tolist()  # row 0: its diagonal and two other columns, sorted
        >>> row0 == sorted(row0), 0 in row0, len(set(row0))
        (True, True, 3)
        >>> rows = torch.repeat_interleave(torch.arange(4), rowptr.diff())
        >>> bool(data[col == rows].min() > 3), col.dtype, rowptr.dtype
        (True, torch.int64, torch.int64)
    """
    import torch

    cols, values, pointers = [], [], [0]
    for row in range(size):
        others = [c for c in torch.randperm(size, generator=generator).tolist() if c != row][:2]
        for col in sorted([row, *others]):
            cols.append(col)
            values.append(3.0 + torch.rand((), generator=generator).item() if col == row
                          else 0.5 * torch.randn((), generator=generator).item())
        pointers.append(len(cols))
    return (torch.tensor(values, dtype=torch.float64), torch.tensor(cols, dtype=torch.int64),
            torch.tensor(pointers, dtype=torch.int64))


def _build(names: list[str], groups: list, size: int, width: int | None, seed: int,
           plain: dict) -> tuple[list, str]:
    import torch

    generator = torch.Generator().manual_seed(seed)
    made: dict[str, tuple[Any, str]] = {}
    for values, columns, pointers, shape in groups:
        data, col, rowptr = csr_matrix(size, generator)
        made[values] = (data.requires_grad_(), f"{values}: float64 ({len(data)},) stored values")
        made[columns] = (col, f"{columns}: int64 ({len(col)},) sorted column indices")
        made[pointers] = (rowptr, f"{pointers}: int64 ({size + 1},) row pointers")
        if shape is not None:
            made[shape] = ((size, size), f"{shape}=({size}, {size})")
    args, parts = [], []
    for name in names:
        if name in made:
            value, text = made[name]
        elif name in plain:
            value, text = plain[name], f"{name}={plain[name]!r}"
        else:
            dims = (size,) if width is None else (size, width) if width else ()
            value = torch.randn(dims, dtype=torch.float64, generator=generator).requires_grad_()
            text = f"{name}: float64 {dims}"
        args.append(value)
        parts.append(text)
    return args, ", ".join(parts) + " (a sparse matrix in CSR form: a diagonally dominant " \
        "square matrix, three stored entries per row)"
