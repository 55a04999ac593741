"""Arguments the code only tests for truth: flags (private).

A flag kept on ctx and tested in backward (``ctx.flag = flag`` ... ``if ctx.flag:``) was
synthesised as a float tensor, and backward raised "Boolean value of Tensor with more than one
value is ambiguous", an error real inputs never meet. An argument whose every use (in forward,
setup_context and, through what they store on ctx, backward) is a truth test is a bool:
``if flag:``, ``while flag:``, ``x if flag else y``, ``assert flag``, ``not flag``, ``bool(flag)``,
``a and flag`` inside one of those. Storing it on ctx (``ctx.flag = flag``), in a local
(``flag = ctx.flag``) or saving it as a tensor (``ctx.save_for_backward(torch.tensor(flag))``
... ``flag, = ctx.saved_tensors``, :mod:`~gradsmith.discovery.saved_values`) only passes it
on. Read from the source, never by running it.
"""

from __future__ import annotations

import ast
from typing import Any

from gradsmith.discovery.saved_values import saved_locals, wrapped_for_saving
from gradsmith.discovery.source import parse as _parse
from gradsmith.discovery.source import stored_on_ctx


def truth_tested(owner: Any, names: list[str]) -> set[str]:
    """The names in ``names`` whose every use is a truth test (and that are used at all).

    Example:
        >>> import torch
        >>> class F(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x, accumulate):
        ...         ctx.accumulate = accumulate
        ...         return x * 2
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         return (g * 2 if not ctx.accumulate else g + g), None
        >>> sorted(truth_tested(F, ["x", "accumulate"]))
        ['accumulate']
    """
    forward = getattr(owner, "forward", owner)
    setup = vars(owner).get("setup_context") if isinstance(owner, type) else None
    backward = getattr(owner, "backward", None) if isinstance(owner, type) else None
    trees = [t for t in (_parse(forward), _parse(setup)) if t is not None]
    stored: dict[str, str] = {}  # ctx attribute -> parameter (also ctx.flag = inputs[0])
    for tree in trees:
        stored.update(stored_on_ctx(tree, names))
    tested: dict[str, bool] = {}  # parameter -> every use so far a truth test
    for tree in trees:
        _read(tree, {n: n for n in names}, stored, tested)
    saved = saved_locals(owner, names)  # quant, n = ctx.saved_tensors (torch.tensor(flag))
    tree = _parse(backward) if stored or saved else None
    if tree is not None:
        _read(tree, saved, stored, tested)
    return {name for name, only_tests in tested.items() if only_tests}


def _read(tree: ast.AST, locals_: dict[str, str], stored: dict[str, str],
          tested: dict[str, bool]) -> None:
    """Record, per parameter, whether each use in ``tree`` is a truth test."""
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    aliases = dict(locals_)
    for node in ast.walk(tree):  # flag = ctx.flag: the local stands for the parameter
        if isinstance(node, ast.Assign) and _ctx_attr(node.value) in stored and all(
                isinstance(t, ast.Name) for t in node.targets):
            aliases.update({t.id: stored[node.value.attr] for t in node.targets})
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            name = aliases.get(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            name = stored.get(node.attr) if _ctx_attr(node) is not None else None
        else:
            continue
        if name is None or _passed_on(node, parents, stored, aliases) or \
                wrapped_for_saving(node, parents):
            continue
        tested[name] = tested.get(name, True) and _in_test(node, parents)


def _ctx_attr(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
            node.value.id == "ctx":
        return node.attr
    return None


def _passed_on(node: ast.AST, parents: dict, stored: dict[str, str],
               aliases: dict[str, str]) -> bool:
    """``ctx.flag = flag`` or ``flag = ctx.flag``: the value is passed on, not used."""
    parent = parents.get(node)
    if not isinstance(parent, ast.Assign) or parent.value is not node:
        return False
    return all(_ctx_attr(t) in stored or isinstance(t, ast.Name) and t.id in aliases
               for t in parent.targets)


def _in_test(node: ast.AST, parents: dict) -> bool:
    parent = parents.get(node)
    if isinstance(parent, (ast.If, ast.While, ast.IfExp, ast.Assert)):
        return parent.test is node
    if isinstance(parent, ast.UnaryOp):
        return isinstance(parent.op, ast.Not)
    if isinstance(parent, ast.BoolOp):  # `a and flag` is a test only where the whole is one
        return _in_test(parent, parents)
    if isinstance(parent, ast.comprehension):
        return node in parent.ifs
    return isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and \
        parent.func.id == "bool" and parent.args == [node]
