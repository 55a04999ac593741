"""Arguments forward asserts to be instances of a class of the project (private).

``assert isinstance(func, AdjModule), "Expected func to be an instance of AdjModule"`` (or
``if not isinstance(func, AdjModule): raise TypeError(...)``): no stand-in of gradsmith's can
pass that check, whatever it computes, so every synthesised layout failed on it and the row was
a skip. The project says what to pass: the class itself, or (when it is abstract) its concrete
subclasses the project defines, each built with the values its constructor states
(:func:`~gradsmith.discovery.builders.class_builds`). Synthesis tries those first, one plan per
build; a class of torch or of the standard library is not the project's and is left to the
other readers (a ``torch.Tensor`` check says a tensor, which synthesis gives anyway).
"""

from __future__ import annotations

import ast
import inspect
from typing import Any

from gradsmith.discovery.builders import Built, class_builds
from gradsmith.discovery.slots import Slot
from gradsmith.discovery.source import parse as _parse

_MAX_BUILDS = 4  # builds tried per asserted argument


def asserted_classes(target: Any, names: list[str]) -> dict[str, type]:
    """Each parameter of ``target`` (forward) that it asserts or checks to be an instance of
    one class of its own project, with that class.

    Example:
        >>> class Dynamics:
        ...     pass
        >>> def forward(ctx, x, func):
        ...     assert isinstance(func, Dynamics), "Expected func to be a Dynamics"
        ...     return x
        >>> {n: c.__name__ for n, c in asserted_classes(forward, ["x", "func"]).items()}
        {'func': 'Dynamics'}
    """
    tree = _parse(target)
    if tree is None:
        return {}
    try:
        scope = inspect.unwrap(target).__globals__
    except (AttributeError, ValueError):
        return {}
    home = (getattr(target, "__module__", "") or "").split(".")[0]
    found: dict[str, type] = {}
    for node in ast.walk(tree):
        test = node.test if isinstance(node, ast.Assert) else _refused(node)
        if not (isinstance(test, ast.Call) and isinstance(test.func, ast.Name)
                and test.func.id == "isinstance" and len(test.args) == 2
                and isinstance(test.args[0], ast.Name) and test.args[0].id in names):
            continue
        cls = _resolve(test.args[1], scope)
        if isinstance(cls, type) and cls.__module__.split(".")[0] == home:
            found[test.args[0].id] = cls
    return found


def _refused(node: ast.AST) -> ast.AST | None:
    """``isinstance(func, C)`` of ``if not isinstance(func, C): raise ...``; None for any
    other statement (``if isinstance(x, Sparse):`` picks a branch, it refuses nothing)."""
    if (isinstance(node, ast.If) and isinstance(node.test, ast.UnaryOp)
            and isinstance(node.test.op, ast.Not)
            and any(isinstance(s, ast.Raise) for s in node.body)):
        return node.test.operand
    return None


def _resolve(node: ast.AST, scope: dict[str, Any]) -> Any:
    """The object a name or dotted name refers to in ``scope`` (forward's globals)."""
    if isinstance(node, ast.Name):
        return scope.get(node.id)
    if isinstance(node, ast.Attribute):
        return getattr(_resolve(node.value, scope), node.attr, None)
    return None


def concrete_builds(cls: type) -> list[Built]:
    """Builds of ``cls`` or, depth first, of its subclasses the project defined (those
    imported), concrete ones only."""
    builds: list[Built] = []
    seen: set[type] = set()
    stack = [cls]
    while stack and len(builds) < _MAX_BUILDS:
        klass = stack.pop(0)
        if klass in seen:
            continue
        seen.add(klass)
        builds += class_builds(klass)
        stack += klass.__subclasses__()
    return builds[:_MAX_BUILDS]


def with_asserted(plans: list[list[Slot]], classes: dict[str, type]) -> list[list[Slot]]:
    """``plans`` after, first, copies in which each asserted argument is a build of its class
    (:func:`concrete_builds`), shown in the Inputs column as the project's own object."""
    out: list[list[Slot]] = []
    for name, cls in classes.items():
        for built in concrete_builds(cls):
            for plan in plans:
                out.append([Slot(s.name, "config", built, s.hint, frozen=s.frozen)
                            if s.name == name else s for s in plan])
    return [*out, *plans]
