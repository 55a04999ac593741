"""Kernels that split the last dimension in halves want it even (private).

Rotary embeddings and gated units launch kernels that handle ``head_dim // 2`` columns twice
(``half = D // 2``; ``tl.arange(0, BLOCK // 2)``): with an odd last dimension the last column
is never written, and an output made with ``torch.empty_like`` holds uninitialised memory
there, which no caller passes. Where a Function launching Triton kernels halves a size (in its
forward, the helpers forward hands its parameters to, or the kernels), synthesised shapes that
change sizes keep the last dimension even. Plain PyTorch code says the same when it halves a
size it reads off a tensor (``x[..., : x.shape[-1] // 2]``, ``half = x.size(-1) // 2``: a
rotary embedding's ``rotate_half``): with an odd size the halves differ and the backward
written for equal ones is the transpose of nothing a caller runs. Read, never run.
"""

from __future__ import annotations

import ast
import functools
from typing import Any

from gradsmith.discovery.kernel_args import host_code


def halves_sizes(call: Any) -> bool:
    """True when ``call`` (a Function's ``apply``) launches Triton kernels and its code or
    theirs halves a size (``n // 2``, ``n >> 1``)."""
    owner = getattr(call, "__self__", None)
    if not isinstance(owner, type):
        return False
    try:
        return _halves(owner)
    except TypeError:  # unhashable
        return False


@functools.lru_cache(maxsize=128)
def _halves(owner: type) -> bool:
    import inspect

    target = getattr(owner, "forward", None)
    try:
        names = list(inspect.signature(target).parameters)
    except (TypeError, ValueError):
        return False
    found = host_code(target, owner, names)
    kernels = [kernel for _, _, launched in found for kernel, _ in launched]
    if not kernels:
        return _halves_shape(target, owner)
    return any(_halved(tree) for tree in [*(t for t, _, _ in found), *kernels])


def _halves_shape(target: Any, owner: type) -> bool:
    """Forward, or a helper it hands any of its local values to, halves a size read off a
    tensor (``.shape[i] // 2``, ``.size(i) // 2``, or a name bound to one)."""
    from gradsmith.discovery.callees import followed
    from gradsmith.discovery.source import parse

    tree = parse(target)
    if tree is None:
        return False
    local = {n.id: n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    trees = [tree, *(t for t, _ in followed(target, tree, local, owner=owner))]
    return any(_halved(t, _sizes(t)) for t in trees)


def _sizes(tree: ast.AST) -> set[str]:
    """Names bound to a size read off a tensor (``d = x.shape[-1]``, ``n = x.size(0)``)."""
    return {t.id for node in ast.walk(tree) if isinstance(node, ast.Assign)
            and _size_read(node.value, set()) for t in node.targets if isinstance(t, ast.Name)}


def _size_read(node: ast.AST, sizes: set[str]) -> bool:
    if isinstance(node, ast.Name):
        return node.id in sizes
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute):
        return node.value.attr == "shape"
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
        and node.func.attr == "size" and len(node.args) == 1


def _halved(tree: ast.AST, sizes: set[str] | None = None) -> bool:
    """A size halved in ``tree``; with ``sizes``, only one read off a tensor (or named in
    ``sizes``): plain code halves counts and indices too."""
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.right, ast.Constant) and (
                (isinstance(node.op, ast.FloorDiv) and node.right.value == 2)
                or (isinstance(node.op, ast.RShift) and node.right.value == 1)) and (
                sizes is None or _size_read(node.left, sizes)):
            return True
    return False


def even_last(resized: tuple, layout: tuple) -> tuple:
    """``resized`` (``layout`` with its sizes changed) with each size that a last dimension of
    ``layout`` becomes made even, wherever that size occurs (sizes stay consistent)."""
    lasts = {shape[-1] for shape in layout if len(shape)}
    bump = {}
    for old, new in zip((d for s in layout for d in s), (d for s in resized for d in s)):
        if old in lasts and new % 2:
            bump[old] = new + 1
    return tuple(tuple(bump.get(o, n) for o, n in zip(old_shape, new_shape))
                 for old_shape, new_shape in zip(layout, resized))
