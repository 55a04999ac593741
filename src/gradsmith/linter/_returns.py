"""Function objects a helper hands back: ``fn = select_impl(kind, stage="bwd")`` then
``fn(...)``, or ``_, _, bwd = _load_kernels()`` then ``bwd(...)`` (GS215 follows the call
into what the helper returns)."""

from __future__ import annotations

import ast


def bound_calls(func: ast.AST, name: str) -> list[tuple[ast.Call, int | None]]:
    """The calls a local ``name`` of ``func`` is assigned from: ``(call, None)`` for
    ``name = call(...)``, ``(call, i)`` for ``a, name = call(...)`` (``name`` is item ``i``)."""
    table = func.__dict__.get("_gs_bound_calls")
    if table is None:
        table = {}
        for sub in ast.walk(func):
            if not isinstance(sub, ast.Assign) or not isinstance(sub.value, ast.Call):
                continue
            for target in sub.targets:
                if isinstance(target, ast.Name):
                    table.setdefault(target.id, []).append((sub.value, None))
                elif isinstance(target, ast.Tuple) and not any(
                        isinstance(e, ast.Starred) for e in target.elts):
                    for i, elt in enumerate(target.elts):
                        if isinstance(elt, ast.Name):
                            table.setdefault(elt.id, []).append((sub.value, i))
        func.__dict__["_gs_bound_calls"] = table
    return table.get(name, [])


def returned(helper: ast.FunctionDef, index: int | None) -> list[ast.expr]:
    """The names a ``return`` of ``helper`` gives (item ``index`` of a returned tuple; both
    sides of ``a if c else b``); calls and other values are left out."""
    found: list[ast.expr] = []
    for sub in ast.walk(helper):
        if not isinstance(sub, ast.Return) or sub.value is None:
            continue
        value = sub.value
        if index is not None:
            if not isinstance(value, ast.Tuple) or index >= len(value.elts):
                continue
            value = value.elts[index]
        stack = [value]
        while stack:
            expr = stack.pop()
            if isinstance(expr, ast.IfExp):
                stack.extend((expr.body, expr.orelse))
            elif isinstance(expr, (ast.Name, ast.Attribute)):
                found.append(expr)
    return found


def as_call(expr: ast.expr) -> ast.Call:
    """A call of ``expr`` with no arguments, placed where ``expr`` is."""
    return ast.copy_location(ast.Call(func=expr, args=[], keywords=[]), expr)


__all__ = ["as_call", "bound_calls", "returned"]
