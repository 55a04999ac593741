"""Helpers shared by rule modules."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from gradsmith.linter._discovery import Method
from gradsmith.linter._facts import Facts
from gradsmith.linter._flow import walk_shallow

CTX_METHODS = ("forward", "setup_context")  # where ctx is filled


def own(facts: Facts, *names: str) -> Iterator[Method]:
    """Methods among ``names`` defined (with ``def``) in the class itself."""
    for name in names:
        method = facts.fc.methods.get(name)
        if method is not None and name in facts.fc.own and method.node in facts.fc.node.body:
            yield method


def short(text: str, limit: int = 32) -> str:
    """``text`` on one line, cut to ``limit`` characters (for one-line messages)."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def once_differentiable(method: Method) -> bool:
    return "once_differentiable" in method.decorators


def attr_of(node: ast.AST, obj: str | None, *attrs: str) -> bool:
    """``<obj>.<attr>`` for one of ``attrs``."""
    return (
        obj is not None
        and isinstance(node, ast.Attribute)
        and node.attr in attrs
        and isinstance(node.value, ast.Name)
        and node.value.id == obj
    )


def nodes(method: Method) -> Iterator[ast.AST]:
    """All nodes of a method body, not entering nested functions or classes."""
    for stmt in method.node.body:
        yield from walk_shallow(stmt)


def last_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


def terminates(body: list[ast.stmt], raising=None) -> bool:
    """Whether every path through ``body`` ends in return/raise.

    ``raising(call)``, when given, says whether a call statement always raises (a helper
    that asserts a literal False): such a statement ends its path too."""
    for stmt in body:
        if isinstance(stmt, (ast.Return, ast.Raise)):
            return True
        if raising is not None and isinstance(stmt, ast.Expr) and \
                isinstance(stmt.value, ast.Call) and raising(stmt.value):
            return True
        if isinstance(stmt, ast.Assert) and isinstance(stmt.test, ast.Constant) and not stmt.test.value:
            return True
        if isinstance(stmt, ast.If) and terminates(stmt.body, raising) and \
                terminates(stmt.orelse, raising):
            return True
        if isinstance(stmt, (ast.With, ast.AsyncWith)) and terminates(stmt.body, raising):
            return True
        if isinstance(stmt, ast.Try):
            if terminates(stmt.finalbody):
                return True
            if (terminates(stmt.body) or terminates(stmt.orelse)) and all(
                terminates(h.body) for h in stmt.handlers
            ):
                return True
        if isinstance(stmt, ast.While) and isinstance(stmt.test, ast.Constant) and stmt.test.value:
            if not any(isinstance(n, ast.Break) for s in stmt.body for n in walk_shallow(s)):
                return True
        if isinstance(stmt, ast.Match) and stmt.cases and all(terminates(c.body) for c in stmt.cases):
            last = stmt.cases[-1].pattern
            if isinstance(last, ast.MatchAs) and last.pattern is None:
                return True
    return False


def trivial(body: list[ast.stmt]) -> bool:
    """A stub body: docstring, pass, ``...`` or raise."""
    for stmt in body:
        if isinstance(stmt, ast.Pass) or isinstance(stmt, ast.Raise):
            continue
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue
        return False
    return True
