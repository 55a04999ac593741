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

The size may also be given as separate integers, ``torch.Size([size1, size2, out_features])``
(or a list or tuple of parameters): each is an int, and a size longer than two is tried first
as a hybrid tensor, an edge list ``(2, E)`` with ``(E, F)`` values (a graph's per-edge
features, the common case), then with every dimension sparse; the first on which backward
also runs (its gradients fit the values) wins. Parameters outside the triple keep the
synthesis plan's plain values (``dim`` compared with 0 is 0), other ones are dense tensors.
Corpus 11c dev's CompRAM ``SpecialSpmm`` was a skip: the sizes became tensors and floats.
"""

from __future__ import annotations

import ast
from typing import Any

from gradsmith.discovery.source import call_name, parse

_BUILDERS = {"sparse_coo_tensor", "FloatTensor", "DoubleTensor", "sparse_coo"}
_KEYWORDS = ("indices", "values", "size")


def sparse_triple(forward: Any, names: list[str]) -> tuple[str, str, Any] | None:
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
        name = call_name(node)
        if name not in _BUILDERS:
            continue
        parts: list[ast.AST | None] = list(node.args[:3]) + [None] * (3 - len(node.args[:3]))
        for kw in node.keywords:
            if kw.arg in _KEYWORDS:
                parts[_KEYWORDS.index(kw.arg)] = kw.value
        found = tuple(p.id if isinstance(p, ast.Name) and p.id in names else None
                      for p in parts[:2]) + (_size_names(parts[2], names),)
        if None not in found:
            return found  # type: ignore[return-value]
    return None


def _size_names(node: ast.AST | None, names: list[str]) -> str | tuple[str, ...] | None:
    """The parameter giving the size, or the parameters of ``torch.Size([a, b, c])``, ``[a,
    b]``, ``(a, b)`` (every element a parameter), else None."""
    if isinstance(node, ast.Name):
        return node.id if node.id in names else None
    if isinstance(node, ast.Call) and node.args and getattr(node.func, "attr", getattr(
            node.func, "id", "")) == "Size":
        node = node.args[0]
    if isinstance(node, (ast.List, ast.Tuple)) and len(node.elts) >= 2 and all(
            isinstance(e, ast.Name) and e.id in names for e in node.elts):
        return tuple(e.id for e in node.elts)  # type: ignore[union-attr]
    return None


def sparse_inputs(call, forward: Any, params: list, seed: int, plan: list | None = None):
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
    plain = {s.name: s.value for s in plan or () if s.kind == "value" and isinstance(
        s.value, (bool, int, float, str))}
    sparse_dims = [2, len(triple[2])] if isinstance(triple[2], tuple) else [2]
    for dims in dict.fromkeys(d for d in sparse_dims if d >= 2):
        built = []
        for nodes, edges, width in ((4, 7, 3), (6, 11, 2)):
            args, text = _build(names, triple, nodes, dims, edges, width, seed, plain)
            if probe(call, args) is not True:
                break
            built.append((tuple(args), text))
        if len(built) == 2 and (dims == sparse_dims[-1] or _backward_runs(call, built[0][0])):
            break
    else:
        return None
    if len(built) < 2:
        return None
    (args, text), (other, other_text) = built
    return Synthesized(args, text, (Variant(other, other_text, "other sizes: 6 nodes, 11 "
                                            "edges"),), seed)


def _backward_runs(call, args: tuple) -> bool:
    """Forward and backward run on fresh copies, autograd's check of the gradients' shapes
    included (a hybrid layout whose values get a gradient of another shape is not the one
    the code is written for)."""
    import torch

    fresh = [a.detach().clone().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor)
             else a for a in args]
    try:
        with torch.enable_grad():
            out = call(*fresh)
            outs = [o for o in (out if isinstance(out, (tuple, list)) else [out])
                    if isinstance(o, torch.Tensor) and o.requires_grad]
            torch.autograd.backward(outs, [torch.ones_like(o) for o in outs])
    except Exception:  # noqa: BLE001 - user code: this layout is not the one it takes
        return False
    return True


def _build(names: list[str], triple: tuple[str, str, Any], nodes: int, dims: int, edges: int,
           width: int, seed: int, plain: dict | None = None) -> tuple[list, str]:
    """Distinct positions inside (nodes, nodes[, ...]) (``dims`` sparse dimensions), one value
    (or a row of ``width`` dense values) each, plain values as planned, other tensors
    (nodes, width)."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    index, values, size = triple
    sizes = list(size) if isinstance(size, tuple) else [size]
    dense = max(len(sizes) - dims, 0)
    flat = torch.randperm(nodes ** dims, generator=generator)[:edges]
    indices = torch.stack([flat // nodes ** (dims - 1 - d) % nodes for d in range(dims)])
    shape = [nodes] * dims + [width] * dense
    args, parts = [], []
    for name in names:
        if name == index:
            args.append(indices)
            parts.append(f"{name}: int64 ({dims}, {edges}) distinct positions in "
                         f"({', '.join(map(str, shape[:dims]))})")
        elif name == values:
            args.append(torch.randn(edges, *[width] * dense, dtype=torch.float64,
                                    generator=generator).requires_grad_())
            parts.append(f"{name}: float64 {(edges, *[width] * dense)}")
        elif name == size:
            args.append(torch.Size(shape))
            parts.append(f"{name}=torch.Size({shape})")
        elif name in sizes:
            args.append(shape[sizes.index(name)])
            parts.append(f"{name}={shape[sizes.index(name)]}")
        elif name in (plain or {}):
            args.append(plain[name])
            parts.append(f"{name}={plain[name]!r}")
        else:
            args.append(torch.randn(nodes, width, dtype=torch.float64, generator=generator)
                        .requires_grad_())
            parts.append(f"{name}: float64 ({nodes}, {width})")
    text = ", ".join(parts) + " (a sparse matrix given as indices, values and its size)"
    return args, text
