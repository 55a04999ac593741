"""Kernels that split the last dimension in halves want it even (private).

Rotary embeddings and gated units launch kernels that handle ``head_dim // 2`` columns twice
(``half = D // 2``; ``tl.arange(0, BLOCK // 2)``): with an odd last dimension the last column
is never written, and an output made with ``torch.empty_like`` holds uninitialised memory
there, which no caller passes. Where a Function launching Triton kernels halves a size (in its
forward, the helpers forward hands its parameters to, or the kernels), synthesised shapes that
change sizes keep the last dimension even. Read, never run.
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
        return False
    return any(_halved(tree) for tree in [*(t for t, _, _ in found), *kernels])


def _halved(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.right, ast.Constant) and (
                (isinstance(node.op, ast.FloorDiv) and node.right.value == 2)
                or (isinstance(node.op, ast.RShift) and node.right.value == 1)):
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
