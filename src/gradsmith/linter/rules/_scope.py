"""Which function a bare name in a method means: names a function binds itself or its
enclosing functions bind hide the module's, and a name bound more than once at import time
(both branches of an ``if``, a later ``f = jit(f)``) has no single meaning."""

from __future__ import annotations

import ast

from gradsmith.linter._symbols import import_time, statements


def bindings(source) -> dict[str, int]:
    """How many times each name is bound in a module: at import time (defs on both branches
    of an ``if``, a later ``f = jit(f)`` or an import of the same name make it ambiguous),
    plus once for each ``global`` statement naming it."""
    cached = source.__dict__.get("_gs_scope_bindings")
    if cached is None:
        cached = {}
        for stmt in import_time(source.tree.body, (ast.If, ast.Try, ast.With)):
            for name in _bound_by(stmt):
                cached[name] = cached.get(name, 0) + 1
        for stmt in statements(source.tree.body):  # `global f` in a function may rebind it
            if isinstance(stmt, ast.Global):
                for name in stmt.names:
                    cached[name] = cached.get(name, 0) + 1
        source.__dict__["_gs_scope_bindings"] = cached
    return cached


def _bound_by(stmt: ast.stmt) -> list[str]:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [stmt.name]
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return [(a.asname or a.name).split(".")[0] for a in stmt.names]
    targets = stmt.targets if isinstance(stmt, ast.Assign) else \
        [stmt.target] if isinstance(stmt, (ast.AnnAssign, ast.AugAssign, ast.For)) else []
    return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]


def local_names(func: ast.FunctionDef) -> set[str]:
    """Names a function binds itself (parameters, assignments, local defs and imports): a
    call of one of them is not a call of the module's function. Computed once per def."""
    cached = func.__dict__.get("_gs_scope_locals")
    if cached is not None:
        return cached
    args = func.args
    names = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
    names.update(a.arg for a in (args.vararg, args.kwarg) if a is not None)
    for stmt in statements(func.body):
        names.update(_bound_by(stmt))
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            names.update(n.id for item in stmt.items if item.optional_vars is not None
                         for n in ast.walk(item.optional_vars) if isinstance(n, ast.Name))
        if isinstance(stmt, (ast.Global, ast.Nonlocal)):
            names.update(stmt.names)
    for node in ast.walk(func):
        if isinstance(node, ast.NamedExpr) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    func.__dict__["_gs_scope_locals"] = names
    return names


def enclosing_names(source, klass: ast.ClassDef) -> set[str]:
    """Names bound by the functions a class is defined in (``def make(): def helper(...)``
    then ``class Fn`` calling ``helper``): they hide the module's functions of that name.
    Found by descending from the module through the statements whose lines contain it."""
    names: set[str] = set()
    level: list[ast.AST] = list(source.tree.body)
    while level:
        node = level.pop()
        if node is klass:
            return names
        if not hasattr(node, "lineno"):  # a `case` of a match: look at what it holds
            level.extend(ast.iter_child_nodes(node))
            continue
        if not isinstance(node, (ast.stmt, ast.excepthandler)) or \
                not node.lineno <= klass.lineno <= (node.end_lineno or node.lineno):
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names |= local_names(node)
        level = list(ast.iter_child_nodes(node))
    return names


__all__ = ["bindings", "enclosing_names", "local_names"]
