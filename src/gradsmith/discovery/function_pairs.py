"""Adjoint pairs of function arguments: a map forward calls and its adjoint backward applies.

An operator library wraps its maps for autograd as ``Fn.apply(fw, bw, x)``: forward returns
``fw(x)``, backward ``Fn.apply(ctx.bw, ctx.fw, g)`` (the adjoint's backward being the map) or
``ctx.bw(g)``. Nothing but that use says what ``fw`` and ``bw`` are, and the backward is right
only when ``bw`` is ``fw``'s adjoint, so the stand-ins must be such a pair: two
:class:`~gradsmith.discovery.operators.LinearStandIn` halves of one seed, ``x @ M.T`` and
``y @ M`` with ``M`` a random non-symmetric matrix, so a backward applying the map where its
adjoint belongs still fails. Read, never run. A function forward calls on more than one
argument (an NFFT's ``forward(points, coefficients)``) is not read as a linear map: its
derivative in the other argument is the project's, and an invented one would be wrong.
"""

from __future__ import annotations

import ast
from typing import Any

from gradsmith.discovery.operators import Operator
from gradsmith.discovery.source import method_trees, read_parameter, stored_on_ctx


def adjoint_pairs(owner: Any, names: list[str]) -> dict[str, Operator]:
    """The two halves of each adjoint pair of function arguments: forward calls one on a
    single tensor (``fw(x)``), never the other, and backward applies the other to its
    incoming gradient (``ctx.bw(g)``) or hands the two swapped to a Function
    (``Fn.apply(ctx.bw, ctx.fw, g)``). A function called on more than one argument
    (``forward(x, f_hat)``) is not read as a linear map, nor one backward applies to a saved
    input (``ctx.df(x) * g``: a derivative, not an adjoint).

    Example:
        >>> import torch
        >>> class Wrap(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, fw, bw, x):
        ...         ctx.fw, ctx.bw = fw, bw
        ...         return fw(x)
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         return None, None, Wrap.apply(ctx.bw, ctx.fw, g)
        >>> sorted((n, o.half, o.partner) for n, o in adjoint_pairs(Wrap, ["fw", "bw", "x"]).items())
        [('bw', 'a', 'fw'), ('fw', 'f', 'bw')]
    """
    trees = method_trees(owner)
    forward, backward = trees.get("forward"), trees.get("backward")
    if forward is None or backward is None:
        return {}
    stored: dict[str, str] = {}
    for method in ("forward", "setup_context"):
        stored.update(stored_on_ctx(trees.get(method), names))
    maps = {n for n in names if _called_on_one(forward, n)}
    in_forward = {n for n in names if _called(forward, {n: n}, {}, n)}
    local: dict[str, str] = {}
    for node in ast.walk(backward):  # bw = ctx.bw
        if isinstance(node, ast.Assign) and (name := read_parameter(node.value, {}, stored)):
            local.update({t.id: name for t in node.targets if isinstance(t, ast.Name)})
    found: dict[str, Operator] = {}
    for fw in maps:
        for bw in set(names) - in_forward - {fw}:
            if _on_grad(backward, local, stored, bw) or _swapped(backward, local, stored,
                                                                 names, fw, bw):
                found[fw] = Operator(called=True, half="f", partner=bw)
                found[bw] = Operator(called=True, half="a", partner=fw)
    return found if len(found) == 2 else {}  # one pair, unambiguous


def _called_on_one(tree: ast.AST, name: str) -> bool:
    """Whether forward calls parameter ``name``, always on exactly one positional argument."""
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
             and isinstance(n.func, ast.Name) and n.func.id == name]
    return bool(calls) and all(len(c.args) == 1 and not c.keywords
                               and not isinstance(c.args[0], ast.Starred) for c in calls)


def _called(tree: ast.AST, local: dict[str, str], stored: dict[str, str], name: str) -> bool:
    return any(isinstance(n, ast.Call) and read_parameter(n.func, local, stored) == name
               for n in ast.walk(tree))


def _on_grad(tree: ast.AST, local: dict[str, str], stored: dict[str, str], name: str) -> bool:
    """Whether backward applies parameter ``name`` to its incoming gradient (``ctx.bw(g)``,
    ``bw(grad_output[0] * 2)``); ``ctx.df(x) * g``, a derivative evaluated at a saved input,
    is not an adjoint."""
    defs = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
    if not defs:
        return False
    arguments = defs[0].args
    grads = {a.arg for a in arguments.args[1:]} | (
        {arguments.vararg.arg} if arguments.vararg else set())
    return any(isinstance(n, ast.Call) and read_parameter(n.func, local, stored) == name
               and n.args and any(isinstance(m, ast.Name) and m.id in grads
                                  for m in ast.walk(n.args[0]))
               for n in ast.walk(tree))


def _swapped(tree: ast.AST, local: dict[str, str], stored: dict[str, str], names: list[str],
             fw: str, bw: str) -> bool:
    """Whether ``tree`` calls some ``.apply`` with ``bw`` where ``fw`` was and ``fw`` where
    ``bw`` was."""
    i, j = names.index(fw), names.index(bw)
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "apply" and len(node.args) > max(i, j)):
            if (read_parameter(node.args[i], local, stored) == bw
                    and read_parameter(node.args[j], local, stored) == fw):
                return True
    return False
