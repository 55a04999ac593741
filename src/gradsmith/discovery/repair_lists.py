"""Lists of integers a typed signature asks for, and split sizes that must add up (private).

A TorchScript function or a registered op checks its arguments against its schema: "Expected a
value of type 'List[int]' for argument 'expert_size_list' but instead found type 'Tensor'"
(corpus 12d dev, spent: IBM ModuleFormer's ParallelLinear, a mixture-of-experts linear whose
rows are grouped by expert). No Python frame binds the name, so the failing forward line's call
is read: its function's schema gives the argument's position, and the plain name forward
passes there is the argument to change. The list first tried is ``[1, 2]``; a split it feeds
then says the total it must reach ("split_with_sizes expects split_sizes to sum exactly to 3
... but got split_sizes=[1, 2]"), and :func:`list_edits` rescales the list to it, keeping its
length (the number of groups). Only lists are proposed here: a scalar kind a script function
states is not repaired (a flipped flag gave a false alarm, see :mod:`.repair_named`).
"""

from __future__ import annotations

import ast
import inspect
import re
from typing import Any

from gradsmith.discovery.repair_kinds import Edit, cached
from gradsmith.discovery.source import failing_calls

__all__ = ["list_edits"]

_SCHEMA_LIST = re.compile(r"Expected a value of type 'List\[int\]' for argument '([A-Za-z_]\w*)'")
_SPLIT_SUM = re.compile(r"split_sizes to sum exactly to (\d+) .*but got split_sizes=\[([\d, ]*)\]")


def list_edits(exc: BaseException, args: list, said: str) -> list[Edit]:
    """The list edits ``exc`` asks for (see the module)."""
    text = str(exc)
    out: list[Edit] = []
    if m := _SCHEMA_LIST.search(text):
        out += [Edit(i, "list", (1, 2), f"{said}: its schema types {m[1]} as List[int]")
                for i in _passed_at(exc, args, m[1]) if not isinstance(args[i], list)]
    if m := _SPLIT_SUM.search(text):
        total = int(m[1])
        got = [int(v) for v in m[2].split(",") if v.strip()]
        n = min(len(got), total)
        if n > 0:
            sizes = (1,) * (n - 1) + (total - n + 1,)
            out += [Edit(i, "list", sizes, f"{said}: split sizes adding up to {total}")
                    for i, a in enumerate(args) if isinstance(a, list) and a == got][:1]
    return out


def _passed_at(exc: BaseException, args: list, name: str) -> list[int]:
    """Indices of ``args`` that the innermost Python frame's failing line passes, as a plain
    name, where the called function's schema (``fn.schema``) has the argument ``name``."""
    if (failing := failing_calls(exc)) is None:
        return []
    frame, calls = failing
    for call in calls:
        names = _schema_names(_resolved(call.func, frame))
        if name not in names:
            continue
        at = names.index(name)
        exprs = [k.value for k in call.keywords if k.arg == name] or (
            [call.args[at]] if at < len(call.args) and not any(
                isinstance(a, ast.Starred) for a in call.args[:at + 1]) else [])
        for expr in exprs:
            if isinstance(expr, ast.Name) and expr.id in frame.f_locals:
                value = frame.f_locals[expr.id]
                return [i for i, a in enumerate(args) if a is value and not cached(a)][:1]
    return []


def _resolved(node: ast.AST, frame: Any) -> Any:
    """The object a dotted name (``Owner.fn``, ``fn``) stands for in ``frame``; None when it is
    anything else (only names and attributes are looked up, nothing is called)."""
    if isinstance(node, ast.Name):
        return frame.f_locals.get(node.id, frame.f_globals.get(node.id))
    if isinstance(node, ast.Attribute):
        owner = _resolved(node.value, frame)
        found = None if owner is None else inspect.getattr_static(owner, node.attr, None)
        return found.__func__ if isinstance(found, (staticmethod, classmethod)) else found
    return None


def _schema_names(fn: Any) -> list[str]:
    schema = getattr(fn, "schema", None)
    try:
        return [a.name for a in schema.arguments] if schema is not None else []
    except (AttributeError, TypeError):
        return []
