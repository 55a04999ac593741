"""Kernels a backward reaches without a launch or an extension module (GS215): what a kernel
compiler returns (CuTe DSL's ``cute.compile(...)``, also through a function of the linted
code returning it), and the values a local name is bound to (``fn = ext.bwd`` on one
branch, then ``fn(...)``)."""

from __future__ import annotations

import ast

from gradsmith.linter._symbols import dotted

#: What a compiler returns is a kernel autograd cannot see (CuTe DSL's ``cute.compile``).
_COMPILERS = frozenset({"cutlass.cute.compile"})


def compiler(parts: list[str] | None, sym) -> bool:
    """``parts`` names a kernel compiler through ``sym``'s imports (``cute.compile`` after
    ``import cutlass.cute as cute``)."""
    return bool(parts) and sym is not None and ".".join(
        [sym.imports.get(parts[0], parts[0]), *parts[1:]]) in _COMPILERS


def compiled(inner: ast.Call, find, sym) -> bool:
    """``inner(...)`` (called in ``sym``'s module) gives a compiled kernel:
    ``cute.compile(kernel, ...)`` itself, or a function of the linted code returning one
    (``SoftmaxBackward.compile(dtype, N)``, a static method ending in ``return
    cute.compile(...)``)."""
    parts = dotted(inner.func)
    if not parts:
        return False
    if compiler(parts, sym):
        return True
    node = find(inner.func)
    owner = getattr(find, "owner", lambda node: None)(node) if node is not None else None
    return isinstance(node, ast.FunctionDef) and owner is not None and any(
        isinstance(sub, ast.Return) and isinstance(sub.value, ast.Call)
        and compiler(dotted(sub.value.func), owner) for sub in ast.walk(node))


def bound_values(func: ast.AST, name: str) -> list[ast.expr]:
    """Names and attributes a local ``name`` of ``func`` is assigned (both sides of
    ``a if c else b``); calls and other values are left out."""
    table = func.__dict__.get("_gs_bound_values")
    if table is None:
        table = {}
        for sub in ast.walk(func):
            if isinstance(sub, ast.Assign) and len(sub.targets) == 1 and isinstance(
                    sub.targets[0], ast.Name):
                stack = [sub.value]
                while stack:
                    expr = stack.pop()
                    if isinstance(expr, ast.IfExp):
                        stack.extend((expr.body, expr.orelse))
                    elif isinstance(expr, (ast.Name, ast.Attribute)):
                        table.setdefault(sub.targets[0].id, []).append(expr)
        func.__dict__["_gs_bound_values"] = table
    return table.get(name, [])


__all__ = ["bound_values", "compiled", "compiler"]
