"""Hyperparameters that default to None but that the code requires (private).

``forward(ctx, x, num_bits=None, levels=None)`` with ``assert num_bits is not None or levels is
not None`` (or ``if num_bits is None: raise ...``, or backward's ``assert ctx.num_bits is not
None``) cannot run on the None its signature offers: every plan that keeps the default fails
that check, and a backward that raises it makes an error finding our inputs caused. Such a
parameter that the code uses as a number (``2. ** num_bits``, ``range(n)``, ``(hi - lo) /
levels``) or that is named like one (``num_bits``) gets a number in an extra plan, tried after
the plans that keep None: the value a required parameter of that kind gets (the table's 8 for
``num_bits``, else 2, or 0.5 for a float). Read from the source, never by running it.
"""

from __future__ import annotations

import ast
from typing import Any

from gradsmith.discovery.saved_values import saved_counters, with_saved_counters
from gradsmith.discovery.slots import Slot, _table_value
from gradsmith.discovery.source import parse, read_parameter, stored_on_ctx

__all__ = ["numbered_plans", "required_numbers"]

_NUMBER_CALLS = {"range", "int", "float", "pow", "round", "abs"}


def required_numbers(owner: Any, target: Any, names: list[str]) -> set[str]:
    """Parameters of ``names`` that forward or backward require to be given (an ``is not None``
    test in an ``assert``, also inside ``or``/``and``; an ``is None`` test guarding a ``raise``;
    through ``ctx.P`` in backward) and use as a number or are named like one.

    Example:
        >>> import torch
        >>> class Q(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x, num_bits=None, levels=None):
        ...         assert num_bits is not None or levels is not None, "give one"
        ...         ctx.levels = levels
        ...         return x * (2. ** num_bits)
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         return g, None, None
        >>> sorted(required_numbers(Q, Q.forward, ["x", "num_bits", "levels"]))
        ['num_bits']
    """
    forward = parse(target)
    methods = [forward]
    if isinstance(owner, type):
        methods += [parse(vars(owner).get(m)) for m in ("backward", "setup_context")
                    if m in vars(owner)]
    stored: dict[str, str] = {}
    for tree in methods:
        stored.update(stored_on_ctx(tree, names))
    known = {n: n for n in names}
    guarded: set[str] = set()
    numeric: set[str] = set()
    for tree in filter(None, methods):
        for node in ast.walk(tree):
            if isinstance(node, ast.Assert):
                guarded |= _tested(node.test, ast.IsNot, known, stored)
            elif isinstance(node, ast.If) and any(isinstance(n, ast.Raise) for n in node.body):
                guarded |= _tested(node.test, ast.Is, known, stored)
            numeric |= _numeric_uses(node, known, stored)
    return {n for n in guarded if n in numeric or _number(_table_value(n))}


def _tested(test: ast.AST, op: type, known: dict[str, str], stored: dict[str, str]) -> set[str]:
    """Parameters compared with None by ``op`` (``is not``/``is``) anywhere in ``test``."""
    found = set()
    for node in ast.walk(test):
        if (isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], op)
                and isinstance(node.comparators[0], ast.Constant)
                and node.comparators[0].value is None
                and (name := read_parameter(node.left, known, stored)) is not None):
            found.add(name)
    return found


def _numeric_uses(node: ast.AST, known: dict[str, str], stored: dict[str, str]) -> set[str]:
    """Parameters ``node`` uses as a number: an operand of arithmetic, or ``range(P)``."""
    if isinstance(node, ast.BinOp):
        operands = [node.left, node.right]
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        operands = [node.operand]
    elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
          and node.func.id in _NUMBER_CALLS):
        operands = list(node.args)
    else:
        return set()
    return {n for o in operands if (n := read_parameter(o, known, stored)) is not None}


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def numbered_plans(plans: list[list[Slot]], owner: Any, target: Any,
                   names: list[str]) -> list[list[Slot]]:
    """``plans`` and after them, for each plan that keeps a required parameter's None default,
    the same plan with a number there (see :func:`required_numbers`). A tensor forward only
    saves and whose entries backward compares (``if ups[0] <= ups[1]:``) holds whole numbers
    in every plan (:func:`~gradsmith.discovery.saved_values.saved_counters`)."""
    if counters := saved_counters(owner, names):
        plans = with_saved_counters(plans, counters)
    needed = required_numbers(owner, target, names)
    if not needed:
        return plans
    extra = []
    for plan in plans:
        if any(_held_none(s, needed) for s in plan):
            extra.append([Slot(s.name, "value", _value(s), s.hint, frozen=s.frozen)
                          if _held_none(s, needed) else s for s in plan])
    return plans + extra


def _held_none(slot: Slot, needed: set[str]) -> bool:
    return slot.name in needed and slot.kind == "value" and slot.value is None


def _value(slot: Slot) -> Any:
    """What a required parameter of this kind gets: the table's number, else 2 (0.5 for a
    float)."""
    value = _table_value(slot.name)
    if _number(value):
        return value
    return 0.5 if slot.hint is not None and slot.hint.kind == "float" else 2
