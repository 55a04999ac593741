"""Whether a value backward returns is a list: autograd unpacks only a tuple, so a list is
one value (a count error for two or more inputs, 'expected Variable or None (got list)'
for one)."""

from __future__ import annotations

import ast


def is_list(value: ast.expr | None, method: ast.AST) -> bool:
    """``[a, b]``, ``[g for ...]``, ``list(...)``, ``[g] + [None] * n``, or a local of
    ``method`` that every binding makes a list (``grads = []`` ... ``grads.append(g)``)."""
    if value is None:
        return False
    if _literal(value):
        return True
    if not isinstance(value, ast.Name) or value.id in _parameters(method):
        return False
    listed: set[int] = set()  # the Name nodes an assignment of a list binds
    for node in ast.walk(method):
        if isinstance(node, ast.Assign) and _literal(node.value):
            listed.update(id(t) for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and node.value is not None \
                and _literal(node.value):
            listed.add(id(node.target))
    bound = False
    for node in ast.walk(method):
        if isinstance(node, ast.Name) and node.id == value.id and not isinstance(
                node.ctx, ast.Load):
            if id(node) not in listed:
                return False  # also bound to something else (a tuple, a loop variable)
            bound = True
        elif _binds(node, value.id):
            return False
    return bound


def _literal(value: ast.expr) -> bool:
    if isinstance(value, (ast.List, ast.ListComp)):
        return True
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) \
            and value.func.id == "list" and not value.keywords:
        return True
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add):
        return _literal(value.left) and _literal(value.right)
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Mult):
        return _literal(value.left) or _literal(value.right)
    return False


def _binds(node: ast.AST, name: str) -> bool:
    """Whether a statement other than an assignment binds ``name`` (a loop target, an
    import, a nested def, an ``except ... as``)."""
    if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
        return node.name == name
    if isinstance(node, ast.ExceptHandler):
        return node.name == name
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return any((a.asname or a.name.split(".")[0]) == name for a in node.names)
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return name in node.names
    if isinstance(node, (ast.MatchAs, ast.MatchStar)):
        return node.name == name
    return False


def _parameters(method: ast.AST) -> set[str]:
    args = getattr(method, "args", None)
    if args is None:
        return set()
    names = [*args.posonlyargs, *args.args, *args.kwonlyargs]
    names += [a for a in (args.vararg, args.kwarg) if a is not None]
    return {a.arg for a in names}


__all__ = ["is_list"]
