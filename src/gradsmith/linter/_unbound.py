"""Names a module uses but no statement of it binds (GS215): one a star import of a compiled
extension gives (``from ._C import *``), or one a registrar binds at import time."""

from __future__ import annotations

import ast
import builtins

from gradsmith.linter._kernels import module_named, modules_of
from gradsmith.linter._project import is_extension_module
from gradsmith.linter._symbols import ModuleSymbols, statements

_BUILTINS = frozenset(dir(builtins))
_BINDING = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For, ast.With)


def star(sym: ModuleSymbols, name: str, sym_of: dict) -> bool:
    """``name``, bound nowhere in the module, comes from ``from <extension> import *``: every
    other star import is of a linted module that does not bind it either."""
    if not sym.stars or not free(sym, name):
        return False
    extension = False
    for base in sym.stars:
        if is_extension_module(base, sym):
            extension = True
            continue
        other = module_named(modules_of(sym_of), base, sym)
        if other is None or not free(other, name):
            return False  # a Python module's star import may bind it
    return extension


def free(sym: ModuleSymbols, name: str) -> bool:
    """``name`` is bound nowhere in the module (it may come from a star import)."""
    source = sym.source
    bound = source.__dict__.get("_gs_bound")
    if bound is None:
        bound = set(source.functions) | set(sym.imports) | set(sym.classes)
        for stmt in statements(source.tree.body):
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bound.add(stmt.name)
            elif isinstance(stmt, _BINDING):
                bound.update(node.id for node in ast.walk(stmt)
                             if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store))
        bound = source.__dict__["_gs_bound"] = frozenset(bound)
    return name not in bound and name not in _BUILTINS


__all__ = ["free", "star"]
