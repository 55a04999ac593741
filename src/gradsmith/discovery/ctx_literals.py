"""Options that only backward compares, read through ctx (private).

A Function may store a selector on ctx in forward and branch on it only in backward
(``ctx.in1 = mode`` ... ``mode = ctx.in1; if mode == 'DFA':``, the branch that replaces the
gradient). Forward's body never compares it, so synthesis invented a float (0.5) and the
branch never ran: a PASS that had not checked it. :func:`read_ctx_literals` gives such a
parameter the literals backward compares it with (``==``, ``!=``, ``in (...)``), directly or
through a local, as forward-side comparisons do, so the first set takes the first of them and
the variants the others. A Python value forward saves as a tensor for backward's ``range``
is a count (:func:`~gradsmith.discovery.saved_values.read_saved_counts`). Read, never run.
"""

from __future__ import annotations

import ast
from typing import Any

from gradsmith.discovery.saved_values import read_saved_counts
from gradsmith.discovery.source import forward_parameters, stored_on_ctx
from gradsmith.discovery.source import parse as _parse


def read_ctx_literals(owner: Any, hints: dict) -> None:
    """Add to ``hints`` (name -> Hint) the str and int literals backward compares forward's
    parameters with through ctx; only for a parameter forward gave no other kind.

    Example:
        >>> import torch
        >>> from gradsmith.discovery.hints import Hint
        >>> class F(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x, mode):
        ...         ctx.in1 = mode
        ...         return x.clone()
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         mode = ctx.in1
        ...         return (2 * g if mode == "DFA" else g), None
        >>> hints = {"x": Hint(), "mode": Hint()}
        >>> read_ctx_literals(F, hints)
        >>> hints["mode"].kind, hints["mode"].literals
        ('str', ['DFA'])
    """
    read_saved_counts(owner, hints)  # torch.tensor(repeat) saved; range(repeat) in backward
    found = backward_literals(owner, list(hints))
    for name, values in found.items():
        hint = hints[name]
        words = [v for v in values if isinstance(v, str)]
        kind = "str" if words else "int"
        values = words or values  # a str selector's int comparisons are not its options
        if hint.kind not in (None, kind) or any(type(v) is not type(values[0])
                                                for v in hint.literals):
            continue  # forward says it is something else: its own reading wins
        hint.kind = kind
        hint.literals += [v for v in values if v not in hint.literals]


def backward_literals(owner: Any, names: list[str]) -> dict[str, list]:
    """Parameter -> the str/int literals backward compares it with, through the ctx attribute
    forward (or setup_context) stores it on, or a local assigned from that attribute."""
    backward = getattr(owner, "backward", None) if isinstance(owner, type) else None
    tree = _parse(backward)
    if tree is None:
        return {}
    stored: dict[str, str] = {}
    params = forward_parameters(owner) or names
    for method in ("forward", "setup_context"):
        stored.update(stored_on_ctx(_parse(vars(owner).get(method)), params))
    stored = {attr: name for attr, name in stored.items() if name in names}
    if not stored:
        return {}
    ctx = _first_parameter(tree)
    aliases: dict[str, str] = {}

    def param(node: ast.AST) -> str | None:
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id == ctx:
            return stored.get(node.attr)
        return aliases.get(node.id) if isinstance(node, ast.Name) else None

    for node in ast.walk(tree):  # mode = ctx.in1 (a name assigned anything else is not it)
        if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name):
            name = param(node.value)
            if name is not None and node.targets[0].id not in aliases:
                aliases[node.targets[0].id] = name
            elif name is None:
                aliases[node.targets[0].id] = ""  # reassigned: no longer the parameter
    aliases = {k: v for k, v in aliases.items() if v}
    found: dict[str, list] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            _compared(node, param, found)
    return found


def _compared(node: ast.Compare, param, found: dict[str, list]) -> None:
    sides = [node.left, *node.comparators]
    for i, op in enumerate(node.ops):
        a, b = sides[i], sides[i + 1]
        name, other = (param(a), b) if param(a) is not None else (param(b), a)
        if name is None:
            continue
        if isinstance(op, (ast.Eq, ast.NotEq)):
            values = [other]
        elif isinstance(op, (ast.In, ast.NotIn)) and other is b and isinstance(
                b, (ast.Tuple, ast.List, ast.Set)):
            values = list(b.elts)
        else:
            continue
        for v in values:
            if isinstance(v, ast.Constant) and type(v.value) in (str, int):
                found.setdefault(name, [])
                if v.value not in found[name]:
                    found[name].append(v.value)


def _first_parameter(tree: ast.AST) -> str:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.args.args:
            return node.args.args[0].arg
    return "ctx"
