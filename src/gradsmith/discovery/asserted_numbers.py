"""Arguments forward asserts to be Python numbers (private).

``assert isinstance(v, Number), 'v must be a scalar'`` (or ``if not isinstance(order, int):
raise TypeError(...)``) states the contract: ``v`` is a Python number, an order or a degree the
formula is written for, which no tensor can pass. Synthesis gave it a tensor on every layout
and the row was a skip. Each such argument gets a number of the class asked for in every plan:
an integral class 2, a real one 1.5; not 0 or 1, which code of orders and degrees often treats
apart (``if np.isclose(v, 0): i0e(z)``), so the general formula is the one checked. Read from
forward's source, never by running it; the class is looked up by name in forward's globals.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import numbers
from typing import Any

from gradsmith.discovery.asserted_types import _refused, _resolve
from gradsmith.discovery.slots import Slot
from gradsmith.discovery.source import parse

__all__ = ["asserted_numbers", "with_numbers"]


def asserted_numbers(target: Any, names: list[str]) -> dict[str, int | float]:
    """Each parameter of ``target`` (forward) that it asserts to be an instance of a number
    class (``numbers.Number``, ``Real``, ``Integral``, ``int``, ``float`` or a tuple of them;
    not ``bool``), with the number it gets.

    Example:
        >>> from numbers import Number
        >>> def forward(ctx, v, z):
        ...     assert isinstance(v, Number), 'v must be a scalar'
        ...     return z * v
        >>> asserted_numbers(forward, ["v", "z"])
        {'v': 1.5}
    """
    tree = parse(target)
    if tree is None:
        return {}
    try:
        scope = inspect.unwrap(target).__globals__
    except (AttributeError, ValueError):
        return {}
    found: dict[str, int | float] = {}
    for node in ast.walk(tree):
        test = node.test if isinstance(node, ast.Assert) else _refused(node)
        if not (isinstance(test, ast.Call) and isinstance(test.func, ast.Name)
                and test.func.id == "isinstance" and len(test.args) == 2
                and isinstance(test.args[0], ast.Name) and test.args[0].id in names):
            continue
        classes = _classes(test.args[1], scope)
        if classes and all(issubclass(c, numbers.Number) and not issubclass(c, bool)
                           for c in classes):
            integral = all(issubclass(c, numbers.Integral) for c in classes)
            found[test.args[0].id] = 2 if integral else 1.5
    return found


def with_numbers(plans: list[list[Slot]], found: dict[str, int | float]) -> list[list[Slot]]:
    """``plans`` with each asserted argument a Python number (the assertion refuses anything
    else, so no plan keeps a tensor there); the plans made the same are kept once."""
    out: list[list[Slot]] = []
    for plan in plans:
        new = [Slot(s.name, "value", found[s.name], s.hint, frozen=s.frozen)
               if s.name in found else s for s in plan]
        if new not in out:
            out.append(new)
    return out


def _classes(node: ast.AST, scope: dict[str, Any]) -> tuple[type, ...]:
    """The classes ``isinstance``'s second argument names (``Number``, ``numbers.Real``,
    ``(int, float)``); () for anything else."""
    if isinstance(node, ast.Tuple):
        found = [_classes(e, scope) for e in node.elts]
        return tuple(c for f in found for c in f) if all(found) else ()
    value = _resolve(node, scope)
    if value is None and isinstance(node, ast.Name):
        value = getattr(builtins, node.id, None)
    return (value,) if isinstance(value, type) else ()
