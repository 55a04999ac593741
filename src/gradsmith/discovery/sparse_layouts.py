"""Sparse operands in the layout the code states: COO, CSR or CSC tensors (private).

A forward that reads ``A.ccol_indices()`` and ``A.row_indices()`` (or hands ``A`` to a helper
that does, ``csc_torch_to_scipy(A)``), ``A.crow_indices()``, ``A.indices()`` or compares
``A.layout`` with ``torch.sparse_csr`` takes ``A`` as a sparse tensor in that layout; a dense
guess fails with "values expected sparse tensor layout but got Strided", so every layout
failed and such a Function was a skip (corpus 13a's dQP ``sparse_row_norm``,
``sparse_row_normalize``). Read, never run: :func:`sparse_layouts` names each such
parameter's layout from forward's source and the module-level helpers it passes the parameter
to (two calls deep), and :func:`layout_inputs` builds it: a float64 matrix, every row and
column holding a stored entry (a row norm is never 0), a dominant diagonal where square (a
solve is well posed), made sparse in that layout and differentiable. Plain values keep the
synthesis plan's; other tensors are tried as a column (rows, 1), a vector per row, then a
matrix of the same shape. Tried only after every other plan failed, kept only where forward
and backward run at two sizes; the check then compares gradients on the stored values
(:mod:`gradsmith.checker.sparse_values`).
"""

from __future__ import annotations

import ast
from typing import Any

from gradsmith.discovery.source import module_function, parse

# What reading an attribute of a tensor says about its layout.
_ATTRS = {"ccol_indices": "csc", "row_indices": "csc", "crow_indices": "csr",
          "col_indices": "csr", "indices": "coo", "_indices": "coo", "coalesce": "coo",
          "is_coalesced": "coo", "is_sparse_csr": "csr", "values": "coo", "_values": "coo"}
_LAYOUTS = {"sparse_csc": "csc", "sparse_csr": "csr", "sparse_coo": "coo"}
_SHAPES = (((4, 5), (6, 3)), ((4, 4), (6, 6)))  # rectangular first, then square (a solve)


def sparse_layouts(forward: Any, names: list[str], depth: int = 2) -> dict[str, str]:
    """Each parameter forward (or a helper it passes it to) reads as a sparse tensor: its
    layout, ``"csc"``, ``"csr"`` or ``"coo"``; a layout-specific read wins over ``values()``.

    Example:
        >>> def to_scipy(M):
        ...     return (M.values(), M.row_indices(), M.ccol_indices())
        >>> def forward(ctx, A, p):
        ...     return to_scipy(A)
        >>> sparse_layouts(forward, ["ctx", "A", "p"])
        {'A': 'csc'}
    """
    tree = parse(getattr(forward, "__func__", forward))
    found: dict[str, set[str]] = {}
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and (
                node.value.id in names):
            if node.attr in _ATTRS:
                found.setdefault(node.value.id, set()).add(_ATTRS[node.attr])
        elif isinstance(node, ast.Compare) and len(node.comparators) == 1:
            _compared_layout(node.left, node.comparators[0], names, found)
        elif isinstance(node, ast.Call) and depth and (
                helper := module_function(node, forward)) is not None:
            for arg, param in zip(node.args, helper[1]):
                if isinstance(arg, ast.Name) and arg.id in names:
                    for layout in sparse_layouts(helper[0], [param], depth - 1).values():
                        found.setdefault(arg.id, set()).add(layout)
    return {name: next((lay for lay in ("csc", "csr") if lay in kinds), "coo")
            for name, kinds in found.items()}


def _compared_layout(left: ast.expr, right: ast.expr, names: list[str],
                     found: dict[str, set[str]]) -> None:
    """``A.layout == torch.sparse_csr`` (either side): A is sparse in that layout."""
    for side, other in ((left, right), (right, left)):
        if (isinstance(side, ast.Attribute) and side.attr == "layout"
                and isinstance(side.value, ast.Name) and side.value.id in names
                and isinstance(other, ast.Attribute) and other.attr in _LAYOUTS):
            found.setdefault(side.value.id, set()).add(_LAYOUTS[other.attr])


def layout_inputs(call, forward: Any, params: list, seed: int, plan: list | None = None):
    """:class:`~gradsmith.discovery.layout_search.Synthesized` inputs with the parameters
    :func:`sparse_layouts` names as sparse matrices, or None (none named, or forward and
    backward do not run on them at two sizes)."""
    from gradsmith.discovery.layout_search import Synthesized
    from gradsmith.discovery.probe import backward_error, probe
    from gradsmith.discovery.variants import Variant

    names = [p.name for p in params]
    layouts = sparse_layouts(forward, names)
    if not layouts:
        return None
    plain = {s.name: s.value for s in plan or () if s.kind == "value"}
    for shapes in _SHAPES:
        for other in ("column", "row", "same"):
            built = [_build(names, layouts, shape, other, plain, seed) for shape in shapes]
            if all(probe(call, list(args)) is True and backward_error(call, args) is None
                   for args, _ in built):
                (args, text), (more, more_text) = built
                return Synthesized(args, text, (Variant(
                    more, more_text, f"other sizes: {shapes[1][0]} x {shapes[1][1]}"),), seed)
    return None


def _build(names: list[str], layouts: dict[str, str], shape: tuple[int, int], other: str,
           plain: dict, seed: int) -> tuple[tuple, str]:
    """One argument tuple: sparse matrices of ``shape``, plain values, other tensors."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    rows, cols = shape
    dims = {"column": (rows, 1), "row": (rows,), "same": shape}[other]
    args, parts = [], []
    for name in names:
        if name in layouts:
            args.append(_sparse(shape, layouts[name], gen))
            parts.append(f"{name}: float64 {layouts[name].upper()} {shape}")
        elif name in plain:
            args.append(plain[name])
            parts.append(f"{name}={plain[name]!r}")
        else:
            args.append((torch.rand(dims, generator=gen, dtype=torch.float64) + 0.5)
                        .requires_grad_())
            parts.append(f"{name}: float64 {dims}")
    return tuple(args), ", ".join(parts) + " (sparse operands in the layout the code reads)"


def _sparse(shape: tuple[int, int], layout: str, gen: Any) -> Any:
    """A sparse matrix: about half its entries stored, every row and column one at least."""
    import warnings

    import torch

    rows, cols = shape
    i, j = torch.meshgrid(torch.arange(rows), torch.arange(cols), indexing="ij")
    keep = ((i + 2 * j) % 3 != 0) | (i % cols == j) | (j % rows == i)
    dense = torch.randn(shape, generator=gen, dtype=torch.float64)
    dense = torch.where(keep, dense + torch.where(dense < 0, -0.5, 0.5), 0.0)
    if rows == cols:
        dense = dense + torch.eye(rows, dtype=torch.float64) * (3 + dense.abs().sum(1))
    with warnings.catch_warnings():  # "CSC tensor support is in beta state"
        warnings.simplefilter("ignore")
        made = {"csc": dense.to_sparse_csc, "csr": dense.to_sparse_csr,
                "coo": lambda: dense.to_sparse().coalesce()}[layout]()
    return made.requires_grad_()
