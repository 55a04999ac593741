"""Folders a module puts on ``sys.path`` itself, so that its bare imports reach linted code.

A script outside the package it uses often adds the package's folder first
(``sys.path.append("../Jetfire")`` then ``from Nonlinear import quantize``, where
``Jetfire/Nonlinear/__init__.py`` is linted as ``Jetfire.Nonlinear``). The folder is read from
a literal (or ``os.path.join`` of literals and ``os.path.dirname(__file__)``) at module level
and taken relative to the module's own folder, where such scripts are run from.
"""

from __future__ import annotations

import ast
import os

from gradsmith.linter._symbols import dotted, import_time

_ADD = ("append", "insert")


def module_on_path(modules: dict, name: str, importer):
    """The linted module ``name`` (dotted) found under a folder ``importer`` adds to
    ``sys.path``, else None."""
    folders = _folders(importer)
    if not folders:
        return None
    by_path = _by_path(modules)
    tail = name.replace(".", os.sep)
    for folder in folders:
        for candidate in (f"{tail}.py", os.path.join(tail, "__init__.py")):
            found = by_path.get(os.path.normpath(os.path.join(folder, candidate)))
            if found is not None:
                return found
    return None


def _folders(importer) -> tuple[str, ...]:
    source = importer.source
    found = source.__dict__.get("_gs_sys_path")
    if found is None:
        found = source.__dict__["_gs_sys_path"] = tuple(_read(source)) \
            if "sys.path" in source.text else ()
    return found


def _read(source):
    here = os.path.dirname(os.path.abspath(source.path))
    for stmt in import_time(source.tree.body):
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        parts = dotted(call.func) if isinstance(call, ast.Call) else None
        if not parts or parts[-3:-1] != ["sys", "path"] or parts[-1] not in _ADD \
                or not call.args:
            continue
        text = _text(call.args[-1], here)
        if text is not None:
            yield os.path.normpath(os.path.join(here, text))


def _text(expr: ast.expr, here: str) -> str | None:
    """A path literal, or ``os.path.join``/``dirname``/``abspath`` of literals and
    ``__file__`` (as a path relative to ``here``)."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return expr.value
    if isinstance(expr, ast.Name) and expr.id == "__file__":
        return "__file__"
    parts = dotted(expr.func) if isinstance(expr, ast.Call) else None
    if not parts or parts[:2] != ["os", "path"] or len(parts) != 3:
        return None
    args = [_text(a, here) for a in expr.args]
    if any(a is None for a in args):
        return None
    if parts[2] == "join" and args:
        return os.path.join(*args)
    if parts[2] in ("abspath", "realpath", "normpath") and len(args) == 1:
        return args[0]
    if parts[2] == "dirname" and len(args) == 1:
        return "." if args[0] == "__file__" else os.path.dirname(args[0])
    return None


_PATHS: dict[int, tuple[int, dict]] = {}


def _by_path(modules: dict) -> dict:
    entry = _PATHS.get(id(modules))
    if entry is None or entry[0] != len(modules):
        _PATHS.clear()
        table = {os.path.normpath(os.path.abspath(s.source.path)): s for s in modules.values()}
        entry = _PATHS[id(modules)] = (len(modules), table)
    return entry[1]


def forget() -> None:
    """Drop the path table of the last run."""
    _PATHS.clear()


__all__ = ["forget", "module_on_path"]
