"""Statement-order walk of a method body for :class:`~gradsmith.linter._flow.Flow`.

Branches run from the same state and are joined (union of origins); loop bodies are joined
with the state before the loop (they may not run).
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from gradsmith.linter._flow import UNKNOWN, Flow, Val, join


def header_exprs(stmt: ast.stmt) -> list[ast.AST]:
    """The parts of ``stmt`` evaluated by the statement itself (not its nested blocks)."""
    if isinstance(stmt, (ast.If, ast.While)):
        return [stmt.test]
    if isinstance(stmt, (ast.For, ast.AsyncFor)):
        return [stmt.iter]
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        return [item.context_expr for item in stmt.items]
    if isinstance(stmt, ast.Match):
        return [stmt.subject]
    if isinstance(stmt, (ast.Try, getattr(ast, "TryStar", ast.Try))):
        return []
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return []
    return [stmt]


def _join_env(envs: list[dict[str, Val]]) -> dict[str, Val]:
    keys = set().union(*envs)
    out = {}
    for key in keys:
        vals = [e.get(key, UNKNOWN) for e in envs]
        acc = vals[0]
        for v in vals[1:]:
            acc = join(acc, v) if acc is not v else acc
        out[key] = acc
    return out


def run(flow: Flow, body: list[ast.stmt], visit: Callable[[ast.stmt, Flow], None]) -> None:
    """Walk ``body`` in order, calling ``visit(stmt, flow)`` before ``stmt`` updates the env."""
    for stmt in body:
        visit(stmt, flow)
        _step(flow, stmt, visit)


def _branches(flow: Flow, blocks: list[list[ast.stmt]], visit, keep_before: bool) -> None:
    before = dict(flow.env)
    results = [before] if keep_before else []
    for block in blocks:
        flow.env = dict(before)
        run(flow, block, visit)
        results.append(flow.env)
    flow.env = _join_env(results) if results else before


def _step(flow: Flow, stmt: ast.stmt, visit) -> None:
    if isinstance(stmt, ast.Assign):
        val = flow.eval(stmt.value)
        for target in stmt.targets:
            flow.bind(target, val)
    elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
        flow.bind(stmt.target, flow.eval(stmt.value))
    elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
        old = flow.env.get(stmt.target.id, UNKNOWN)
        rhs = flow.eval(stmt.value)
        tensor = True if (old.tensor or rhs.tensor) else old.tensor
        flow.env[stmt.target.id] = Val(old.origins if tensor is not False else frozenset(), tensor)
    elif isinstance(stmt, ast.If):
        _branches(flow, [stmt.body, stmt.orelse], visit, keep_before=False)
    elif isinstance(stmt, (ast.For, ast.AsyncFor)):
        seq = flow.eval(stmt.iter)
        if seq.elements:
            elem = seq.elements[0]
            for e in seq.elements[1:]:
                elem = join(elem, e)
        else:
            sure = "saved" in seq.origins or "grad" in seq.origins
            elem = Val(seq.origins, True if sure else None)
        before = dict(flow.env)
        flow.bind(stmt.target, elem)
        run(flow, stmt.body, visit)
        flow.env = _join_env([before, flow.env])
        run(flow, stmt.orelse, visit)
    elif isinstance(stmt, ast.While):
        _branches(flow, [stmt.body], visit, keep_before=True)
        run(flow, stmt.orelse, visit)
    elif isinstance(stmt, (ast.With, ast.AsyncWith)):
        for item in stmt.items:
            if item.optional_vars is not None:
                flow.bind(item.optional_vars, UNKNOWN)
        run(flow, stmt.body, visit)
    elif isinstance(stmt, (ast.Try, getattr(ast, "TryStar", ast.Try))):
        run(flow, stmt.body, visit)
        _branches(flow, [h.body for h in stmt.handlers], visit, keep_before=True)
        run(flow, stmt.orelse, visit)
        run(flow, stmt.finalbody, visit)
    elif isinstance(stmt, ast.Match):
        _branches(flow, [case.body for case in stmt.cases], visit, keep_before=True)
    elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        flow.env[stmt.name] = UNKNOWN
