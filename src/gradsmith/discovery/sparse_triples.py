"""Sparse matrices passed as their parts: (indices, values, shape) triples (private).

A forward that builds ``torch.sparse_coo_tensor(indices, values, shape)`` from three of its
parameters needs them to agree: ``indices`` an int64 ``(2, E)`` tensor of positions inside
``shape``, ``values`` an ``(E,)`` tensor, ``shape`` a size ``(N, M)``. No layout of random
floats gives that, so such a Function was skipped. Read, never run: the triple is found in
forward's source (``torch.sparse_coo_tensor``, ``torch.sparse.FloatTensor``, keywords
``indices=``/``values=``/``size=`` too), and :func:`sparse_inputs` builds it, square (the
adjacency of N nodes, at two sizes), with every other tensor
parameter ``(N, d)``: what a sparse ``A @ b`` needs. Tried only after every other plan
failed, and only kept where forward runs.
"""

from __future__ import annotations

import ast
from typing import Any

from gradsmith.discovery.source import parse

_BUILDERS = {"sparse_coo_tensor", "FloatTensor", "DoubleTensor", "sparse_coo"}
_KEYWORDS = ("indices", "values", "size")


def sparse_triple(forward: Any, names: list[str]) -> tuple[str, str, str] | None:
    """The parameters forward passes as a sparse tensor's (indices, values, shape).

    Example:
        >>> def forward(ctx, indices, values, shape, b):
        ...     a = torch.sparse_coo_tensor(indices, values, shape)
        ...     return torch.matmul(a, b)
        >>> sparse_triple(forward, ["indices", "values", "shape", "b"])
        ('indices', 'values', 'shape')
    """
    tree = parse(forward)
    for node in ast.walk(tree) if tree is not None else ():
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name not in _BUILDERS:
            continue
        parts: list[ast.AST | None] = list(node.args[:3]) + [None] * (3 - len(node.args[:3]))
        for kw in node.keywords:
            if kw.arg in _KEYWORDS:
                parts[_KEYWORDS.index(kw.arg)] = kw.value
        found = tuple(p.id if isinstance(p, ast.Name) and p.id in names else None
                      for p in parts)
        if None not in found:
            return found  # type: ignore[return-value]
    return None


def sparse_inputs(call, forward: Any, params: list, seed: int):
    """:class:`~gradsmith.discovery.layout_search.Synthesized` inputs for a forward that builds
    a sparse tensor from a triple of its parameters, or None (no triple, or forward does not
    run on them). Parameters after the last one without a default are not passed; the
    others, outside the triple, are dense tensors. Square sizes only: a backward that
    flattens ``(row, col)`` with ``shape[0]`` as the stride is written for square (adjacency)
    matrices, and a rectangular input would be a false alarm there."""
    from gradsmith.discovery.layout_search import Synthesized
    from gradsmith.discovery.probe import probe
    from gradsmith.discovery.variants import Variant

    required = [i for i, p in enumerate(params) if p.default is p.empty]
    names = [p.name for p in params[:required[-1] + 1]] if required else []
    triple = sparse_triple(forward, names)
    if triple is None:
        return None
    built = []
    for nodes, edges, width in ((4, 7, 3), (6, 11, 2)):
        args, text = _build(names, triple, nodes, nodes, edges, width, seed)
        if probe(call, args) is not True:
            return None
        built.append((tuple(args), text))
    (args, text), (other, other_text) = built
    return Synthesized(args, text, (Variant(other, other_text, "other sizes: 6 nodes, 11 "
                                            "edges"),), seed)


def _build(names: list[str], triple: tuple[str, str, str], rows: int, cols: int, edges: int,
           width: int, seed: int) -> tuple[list, str]:
    """Distinct positions inside (rows, cols), one value each, the other tensors (cols, d)."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    flat = torch.randperm(rows * cols, generator=generator)[:edges]
    indices = torch.stack([flat // cols, flat % cols])
    index, values, size = triple
    args, parts = [], []
    for name in names:
        if name == index:
            args.append(indices)
            parts.append(f"{name}: int64 (2, {edges}) distinct positions in ({rows}, {cols})")
        elif name == values:
            args.append(torch.randn(edges, dtype=torch.float64, generator=generator)
                        .requires_grad_())
            parts.append(f"{name}: float64 ({edges},)")
        elif name == size:
            args.append(torch.Size([rows, cols]))
            parts.append(f"{name}=torch.Size([{rows}, {cols}])")
        else:
            args.append(torch.randn(cols, width, dtype=torch.float64, generator=generator)
                        .requires_grad_())
            parts.append(f"{name}: float64 ({cols}, {width})")
    text = ", ".join(parts) + " (a sparse matrix given as indices, values and its size)"
    return args, text
