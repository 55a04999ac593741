"""Inputs on both sides of a branch on a tensor's rank: an unbatched or batched set (private).

Code that tests a tensor's rank (``if len(x.shape) < 3:``, ``x.dim() == 2``, ``x.ndim > 2``)
has a path for batched and one for unbatched inputs, and synthesis builds only one of them:
scqpth's ``TorchLULayer`` was checked on batched ``(2, 3, 3)`` systems, where its backward is
exact, while its unbatched path (``xt = x.transpose``, the method, not a tensor) raises for
every 2-D input its forward accepts. Read, never run: where forward or backward compares a
rank with a number and the comparison tells the two ranks apart, :func:`unbatched` offers
the primary layout without its shared leading dimension (each tensor of three or more
dimensions, all with the same first size), or a primary of matrices with a batch of two, as
another set, which variants keep only where forward runs on it.
"""

from __future__ import annotations

import ast
from typing import Any

from gradsmith.discovery.source import method_trees

_RANK_CALLS = {"dim", "ndimension"}


def unbatched(call: Any, layout: Any) -> list[tuple[str, dict[str, Any], Any]]:
    """The layout on the other side of a rank branch in the code, as a variant candidate:
    without its leading batch dimension, or (a primary of matrices) with one; else nothing.

    Example:
        >>> import torch
        >>> class F(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, A, b):
        ...         return A @ b if A.dim() == 2 else torch.bmm(A, b)
        >>> unbatched(F.apply, ((2, 3, 3), (2, 3, 5)))[0][2]
        ((3, 3), (3, 5))
        >>> unbatched(F.apply, ((3, 3), (3, 5)))[0][2]
        ((2, 3, 3), (2, 3, 5))
    """
    shapes = [tuple(s) for s in layout or ()]
    if not shapes or any(len(s) < 2 for s in shapes):
        return []
    if all(len(s) >= 3 for s in shapes) and len({s[0] for s in shapes}) == 1:
        other, word = tuple(s[1:] for s in shapes), "unbatched"
    else:
        other, word = tuple((2, *s) for s in shapes), "batched"
    owner = getattr(call, "__self__", None)
    tests = [t for tree in method_trees(owner).values() for t in _rank_tests(tree)]
    # only where a test the code makes answers differently for the two ranks: the other side
    if not any(test(len(a)) != test(len(b)) for test in tests for a, b in zip(shapes, other)):
        return []
    return [(f"{word}: shapes {', '.join(map(str, other))} (the code branches on a "
             "tensor's rank)", {}, other)]


_OPS = {ast.Lt: int.__lt__, ast.LtE: int.__le__, ast.Gt: int.__gt__, ast.GtE: int.__ge__,
        ast.Eq: int.__eq__, ast.NotEq: int.__ne__}


def _rank_tests(tree: ast.AST) -> list[Any]:
    """Each comparison of a rank (``len(x.shape)``, ``x.dim()``, ``x.ndim``) with a number in
    ``tree``, as a test of a rank."""
    tests = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare) or len(node.comparators) != 1 or type(
                node.ops[0]) not in _OPS:
            continue
        op, (left, right) = _OPS[type(node.ops[0])], (node.left, node.comparators[0])
        if _is_rank(left) and isinstance(right, ast.Constant) and type(right.value) is int:
            tests.append(lambda r, op=op, k=right.value: op(r, k))
        elif _is_rank(right) and isinstance(left, ast.Constant) and type(left.value) is int:
            tests.append(lambda r, op=op, k=left.value: op(k, r))
    return tests


def _is_rank(node: ast.AST) -> bool:
    if isinstance(node, ast.Attribute) and node.attr == "ndim":
        return True
    if not isinstance(node, ast.Call):
        return False
    if isinstance(node.func, ast.Attribute) and node.func.attr in _RANK_CALLS:
        return True
    return (isinstance(node.func, ast.Name) and node.func.id == "len" and len(node.args) == 1
            and isinstance(node.args[0], ast.Attribute) and node.args[0].attr == "shape")
