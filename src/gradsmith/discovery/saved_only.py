"""Forward parameters that forward only hands to backward, never computes with (private).

``ctx.save_for_backward(T, mask, axes)`` with no other use of ``mask`` or ``axes`` in forward:
forward runs on any shape of them, so a synthesised shape is never tested before backward
reads it. When backward then raises a shape error on every layout tried, the shapes may be
the inputs' fault, not the Function's (corpus 11a's pytorch_kinematics
``_FKAnalyticalBackward``: a pass-through forward, a geometric Jacobian in backward over a
(joints, 3) axis table the code never sizes). A parameter forward computes with has had its
shape checked by forward, so a backward that rejects it stays a ``backward-error``.
"""

from __future__ import annotations

import ast
from typing import Any

from gradsmith.discovery.source import parse


def saved_only(fn: Any) -> list[str]:
    """Parameters of ``fn``'s forward (``ctx`` left out) used only as arguments of
    ``ctx.save_for_backward``, stored on ctx as they are (``ctx.a = a``) or returned as
    they are, in order; empty when forward's source cannot be read.

    Example:
        >>> import torch
        >>> class Inject(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x, table, axes):
        ...         ctx.save_for_backward(table, axes)
        ...         ctx.n = table.shape[0]
        ...         return x.clone()
        >>> saved_only(Inject)
        ['axes']
    """
    forward = vars(fn).get("forward") if isinstance(fn, type) else None
    tree = parse(getattr(forward, "__func__", forward)) if forward is not None else None
    if tree is None:
        return []
    function = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef))
    params = [a.arg for a in function.args.args[1:]]
    passed: set[int] = set()  # ids of Name nodes that only carry the value on
    for node in ast.walk(function):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr == "save_for_backward":
            passed |= {id(a) for a in node.args if isinstance(a, ast.Name)}
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and all(
                isinstance(t, ast.Attribute) for t in node.targets):
            passed.add(id(node.value))
        elif isinstance(node, ast.Return) and node.value is not None:
            values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
            passed |= {id(v) for v in values if isinstance(v, ast.Name)}
    used = {n.id for n in ast.walk(function)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and id(n) not in passed}
    return [p for p in params if p not in used and any(
        isinstance(n, ast.Name) and n.id == p for n in ast.walk(function))]
