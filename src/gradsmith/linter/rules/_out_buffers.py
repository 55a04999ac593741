"""Out-buffers of opaque calls: a name that holds an uninitialised buffer (``torch.empty``)
on one path and, when an ``inplace`` option picks it, a view of another tensor is written by
the call it is handed to (read for GS101/GS102/GS217 by ``rules/_inplace``)."""

from __future__ import annotations

import ast
from collections.abc import Callable

from gradsmith.linter._symbols import dotted, statements
from gradsmith.linter.rules._common import short
from gradsmith.linter.rules._inplace_scope import chosen_by_option

#: Allocations whose contents are undefined until something writes them.
_EMPTY = frozenset({"empty", "empty_like", "new_empty", "empty_strided"})
#: Calls whose result shares the storage of their receiver.
_VIEWS = frozenset({"chunk", "split", "unbind", "view", "view_as", "reshape", "narrow",
                    "select", "t", "transpose", "permute", "unsqueeze", "squeeze", "flatten",
                    "unflatten", "movedim", "split_with_sizes", "tensor_split", "expand",
                    "diagonal", "as_strided"})


def option_buffers(func: ast.FunctionDef, source, opaque: Callable[[ast.Call], str | None]):
    """``writes(stmt)``: (call, argument, description) for each argument of an opaque call in
    ``stmt`` that is an out-buffer (uninitialised on one path, never used before the call)
    bound, on a path an ``inplace`` option picks, to a view of another tensor.

    ``opaque(call)`` names the callee when the linted code cannot see its body (a compiled
    extension, a module outside the linted files), else None."""
    chosen_stmts, chosen_names = chosen_by_option(func, source)
    if not chosen_stmts and not chosen_names:
        return lambda stmt: ()
    bindings: dict[str, list[tuple[ast.stmt, ast.expr]]] = {}
    for stmt in statements(func.body):
        if isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                for name, value in _pairs(target, stmt.value):
                    bindings.setdefault(name, []).append((stmt, value))
    fresh: set[str] = set()
    changed = True
    while changed:  # names that hold an uninitialised buffer (or a view of one) on some path
        changed = False
        for name, values in bindings.items():
            if name not in fresh and any(_empty(v) or _roots(v) & fresh for _, v in values):
                fresh.add(name)
                changed = True
    picked = {name for name in fresh if name in chosen_names or any(
        id(stmt) in chosen_stmts and not _empty(v) and not _roots(v) & fresh
        for stmt, v in bindings[name])}
    if not picked:
        return lambda stmt: ()
    first = _first_uses(func, fresh, bindings)

    def writes(stmt: ast.stmt):
        out = []
        for node in ast.walk(stmt) if not isinstance(stmt, _COMPOUND) else ():
            if not isinstance(node, ast.Call):
                continue
            callee = None
            for arg in node.args:
                if isinstance(arg, ast.Name) and arg.id in picked \
                        and first.get(arg.id) is node:
                    callee = callee or opaque(node)
                    if callee is None:
                        break
                    out.append((node, arg, f"`{short(callee, 28)}()` out-buffer (`inplace` option)"))
                    break
        return out

    return writes


_COMPOUND = (ast.If, ast.For, ast.While, ast.With, ast.Try, ast.FunctionDef,
             ast.AsyncFunctionDef, ast.ClassDef)


def _pairs(target: ast.expr, value: ast.expr):
    """(name, the value it is bound to) for ``target = value``, element by element when both
    sides are tuples of the same length."""
    if isinstance(target, ast.Name):
        yield target.id, value
    elif isinstance(target, (ast.Tuple, ast.List)):
        elts = value.elts if isinstance(value, (ast.Tuple, ast.List)) and \
            len(value.elts) == len(target.elts) else None
        for i, sub in enumerate(target.elts):
            yield from _pairs(sub, elts[i] if elts is not None else value)


def _empty(value: ast.expr) -> bool:
    if isinstance(value, ast.IfExp):
        return _empty(value.body) or _empty(value.orelse)
    parts = dotted(value.func) if isinstance(value, ast.Call) else None
    return bool(parts) and parts[-1] in _EMPTY


def _roots(value: ast.expr) -> set[str]:
    """Names whose storage ``value`` is (a view of)."""
    if isinstance(value, ast.Name):
        return {value.id}
    if isinstance(value, (ast.Subscript, ast.Starred)):
        return _roots(value.value)
    if isinstance(value, ast.IfExp):
        return _roots(value.body) | _roots(value.orelse)
    if isinstance(value, (ast.Tuple, ast.List)):
        return set().union(*(_roots(e) for e in value.elts)) if value.elts else set()
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) \
            and value.func.attr in _VIEWS:
        return _roots(value.func.value)
    return set()


def _first_uses(func: ast.FunctionDef, fresh: set[str],
                bindings: dict[str, list[tuple[ast.stmt, ast.expr]]]) -> dict[str, ast.Call]:
    """For each buffer name, the first call (in source order, views aside) that reads or
    writes it or a buffer it shares storage with: only there is it surely still unwritten."""
    family = {name: name for name in fresh}

    def head(name: str) -> str:
        while family[name] != name:
            name = family[name]
        return name

    for name in fresh:  # buffers derived from one another share their storage
        for _, value in bindings[name]:
            for root in _roots(value) & fresh:
                family[head(root)] = head(name)
    calls = sorted((n for n in ast.walk(func) if isinstance(n, ast.Call)),
                   key=lambda n: (n.lineno, n.col_offset))
    first: dict[str, ast.Call] = {}
    seen: set[str] = set()
    for call in calls:
        if isinstance(call.func, ast.Attribute) and call.func.attr in _VIEWS:
            continue
        used = {n.id for n in ast.walk(call) if isinstance(n, ast.Name) and n.id in fresh}
        for name in used:
            if head(name) not in seen:
                first[name] = call
        for name in used:
            seen.add(head(name))
    return first


def opaque_callee(call: ast.Call, resolve, find, sym) -> str | None:
    """The dotted name of an imported function whose body the linted code does not hold
    (a compiled extension, a package outside the linted files); None for torch, a linted
    ``def``, a local object's method or a Triton launch."""
    parts = dotted(call.func)
    if not parts or parts[0] not in sym.imports or resolve(parts) or find(call.func) is not None:
        return None
    return ".".join(parts)


__all__ = ["opaque_callee", "option_buffers"]
