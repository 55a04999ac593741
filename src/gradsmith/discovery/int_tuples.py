"""Parameters the code uses as sequences of integers: block shapes, strides, grid sizes (private).

``forward(ctx, input, block_shape, stride, mask, out)`` whose ``setup_context`` reads
``input.shape[-len(block_shape):]`` and whose helper ``zip``\\s ``block_shape`` with ``stride``
takes one integer per trailing dimension of ``input``. Synthesis made ``block_shape`` a float
tensor and ``stride`` the integer 1 (its usual value as a convolution's), and every layout
failed (``object of type 'float' has no len()``): corpus 11a dev's torch-named-linops
``ArrayToBlocksFn`` and ``InterpolateAdjointFn`` (``grid_size: tuple[int, ...]``) were skips.

Read, never run, from forward, ``setup_context`` and the functions of the project they hand
the parameter to (a few levels deep): a parameter is a **sequence of integers** when

- it is annotated so (``tuple[int, ...]``, ``Sequence[int]``, ``List[int]``), or
- the code takes its ``len()``, ``zip``\\s it, star-unpacks it (``torch.zeros(*shape)``) or
  makes it a ``tuple``/``list``, never uses it as a tensor (no tensor method or attribute
  anywhere it is read), and no annotation says otherwise (``width: float | tuple[float,
  ...]`` stays a float).

:func:`tupled_plans` gives the plans with each such parameter a one-element tuple (``(1,)`` for
a stride, ``(2,)`` otherwise): one element fits the last dimension of any tensor the layouts
give. They are tried after every other plan, so a Function that ran before is unchanged.
"""

from __future__ import annotations

import ast
import inspect
from typing import Any

from gradsmith.discovery.slots import Slot, _table_value
from gradsmith.discovery.source import parse

_SEQUENCE_CALLS = {"len", "zip", "tuple", "list"}
_INT_SEQUENCE = ("tuple[int", "Tuple[int", "Sequence[int", "List[int", "list[int")


def int_sequences(owner: Any, target: Any, names: list[str]) -> set[str]:
    """Names of the parameters used as sequences of integers (see the module docstring)."""
    from gradsmith.discovery.callees import followed

    found = _annotated(target, names)
    used: set[str] = set()
    tensors: set[str] = set()
    methods = [target] + [getattr(owner, m, None) for m in ("setup_context", "backward")
                          if isinstance(owner, type)]
    for method in methods:
        tree = parse(getattr(method, "__func__", method)) if method is not None else None
        if tree is None:
            continue
        known = {n: n for n in names}
        _read(tree, known, used, tensors)
        if method is target:
            for helper, passed in followed(target, tree, known, owner if isinstance(
                    owner, type) else None, package=True):
                _read(helper, passed, used, tensors)
    return found | (used - tensors - _annotated_otherwise(target, names))


def tupled_plans(plans: list[list[Slot]], tupled: set[str]) -> list[list[Slot]]:
    """Each plan with the sequence parameters as one-element int tuples (those it would
    change only)."""
    out = []
    for plan in plans:
        changed = [Slot(s.name, "value", (_element(s.name),), s.hint, frozen=True)
                   if s.name in tupled and s.kind in ("tensor", "value", "scalar") and not
                   isinstance(s.value, tuple) else s for s in plan]
        if changed != plan and changed not in out:
            out.append(changed)
    return out


def _element(name: str) -> int:
    """1 for a stride or a step (the usual value of one), 2 otherwise."""
    return 1 if _table_value(name) == 1 and "size" not in name else 2


def _annotated(target: Any, names: list[str]) -> set[str]:
    try:
        params = inspect.signature(target).parameters
    except (TypeError, ValueError):
        return set()
    return {n for n in names if n in params and params[n].annotation is not inspect.Parameter.empty
            and str(params[n].annotation).replace("typing.", "").startswith(_INT_SEQUENCE)}


def _annotated_otherwise(target: Any, names: list[str]) -> set[str]:
    """Parameters whose annotation names no int (``width: float | tuple[float, ...]``)."""
    try:
        params = inspect.signature(target).parameters
    except (TypeError, ValueError):
        return set()
    return {n for n in names if n in params and params[n].annotation is not
            inspect.Parameter.empty and "int" not in str(params[n].annotation)}


def _read(tree: ast.AST, known: dict[str, str], used: set[str], tensors: set[str]) -> None:
    """Record which parameters (``known``: local name -> parameter) are used as sequences and
    which as tensors (an attribute or method other than ``index``/``count``)."""
    from gradsmith.discovery.hints import _TENSOR_ATTRS

    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id in _SEQUENCE_CALLS:
            used.update(known[a.id] for a in node.args if isinstance(a, ast.Name)
                        and a.id in known)
        elif isinstance(node, ast.Starred) and isinstance(node.value, ast.Name) and \
                node.value.id in known:
            used.add(known[node.value.id])
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                node.value.id in known and node.attr in _TENSOR_ATTRS:
            tensors.add(known[node.value.id])
