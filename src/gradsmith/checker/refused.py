"""A further input set with an option the code itself refuses: not checked, not a defect
(private).

Synthesis checks further input sets with an option changed from the first set's (a flag
flipped from forward's default: ``reduce_bias=False``). When the code states that the other
value is unsupported, ``assert ctx.reduce_bias`` in backward (forward kept
``ctx.reduce_bias = reduce_bias``) or ``raise NotImplementedError`` under ``if not exact:``,
the error on that set is the code's precondition, loud by design: no caller can get a wrong
gradient from it, so it is no demonstrated harm. :func:`refused` reads the statement that
raised: an ``assert`` whose condition, or a ``raise`` whose nearest enclosing ``if``'s
condition, reads only options (forward's non-tensor arguments, directly or through what forward
kept on ctx) and constants, one of them an option this set changed. The set is then left out
with an info finding naming the option; the verdict comes from the other sets. The same
statement failing on the first set stays an error (the first set is never left out), and so
does a crash on a changed option that no such statement states (a plain bug), or one whose
condition reads a tensor (data, not an option).
"""

from __future__ import annotations

import ast
import inspect
import os
from typing import Any

from gradsmith.checker.report import Finding
from gradsmith.discovery.source import (
    forward_parameters,
    method_trees,
    parse_code,
    read_parameter,
    stored_on_ctx,
)

_RAISED = frozenset({"backward-error", "forward-error"})
_PLAIN = (bool, int, float, str, type(None))


def refused(obj: Any, first: tuple, args: tuple, report: Any) -> Finding | None:
    """The info finding that leaves out the input set ``args`` (``report``: its check) when
    each of its errors is forward or backward raising on a statement that refuses an option
    ``args`` changed from ``first``, the first set's arguments (see the module); else None.
    """
    errors = [f for f in report.findings if f.is_error]
    if not errors or any(f.code not in _RAISED for f in errors) or not isinstance(obj, type):
        return None
    names = forward_parameters(obj)
    changed = {n: b for n, a, b in zip(names, first, args) if _differs(a, b)}
    plain = {n for n, a in zip(names, args) if _plain(a)}
    if not changed:
        return None
    said = [_statement(obj, f.details, changed, plain) for f in errors]
    if any(s is None for s in said):
        return None
    statement, options = said[0]
    values = ", ".join(f"{n}={changed[n]!r}" for n in options)
    return Finding(
        "refused-option", "info",
        f"{statement}: {values} is refused by the code, not checked",
        "nothing to fix: the code states it does not support this value; to have it checked, "
        "support it in backward, or reject it in forward (`raise ValueError(...)`) so a caller "
        "learns before training", errors[0].check, None,
        {"options": {n: changed[n] for n in options}, "where": errors[0].details.get("where"),
         "exception": errors[0].details.get("exception")})


def _plain(value: Any) -> bool:
    return isinstance(value, _PLAIN) or (
        isinstance(value, tuple) and all(isinstance(v, _PLAIN) for v in value))


def _differs(a: Any, b: Any) -> bool:
    """Whether ``b`` is another plain value (an option's) than ``a``.

    Example:
        >>> _differs(True, False), _differs(1, True), _differs("sum", "sum")
        (True, True, False)
    """
    if not (_plain(a) and _plain(b)):
        return False
    return type(a) is not type(b) or a != b


def _statement(obj: type, details: dict, changed: dict, plain: set[str]):
    """``(statement, options)`` for the assert or guarded raise at the error's line in one of
    ``obj``'s methods when its condition refuses ``changed`` options (``statement`` says it:
    "backward asserts ctx.reduce"); else None."""
    where = details.get("where") or {}
    found = _located(obj, where.get("file"), where.get("line"))
    if found is None:
        return None
    method, tree, line = found
    node, parents = _innermost(tree, line)
    if isinstance(node, ast.Assert) and details.get("exception") == "AssertionError":
        test, said = node.test, f"{method} asserts {{}}"
    elif isinstance(node, ast.Raise) and (guard := _guard(node, parents)) is not None:
        branch = "the else of " if _in_else(node, guard, parents) else ""
        test = guard.test
        said = f"{method} raises {details.get('exception', 'an error')} in {branch}`if {{}}`"
    else:
        return None
    options = _options_read(obj, method, tree, test, plain)
    hit = [n for n in options or () if n in changed]
    if not hit:
        return None
    text = ast.unparse(test)
    return said.format(text if len(text) <= 80 else text[:77] + "..."), hit


def _located(obj: type, file: str | None, line: int | None):
    """``(method, tree, line in tree)`` for the forward, setup_context or backward of ``obj``
    whose source holds ``file:line``."""
    if not file or not isinstance(line, int):
        return None
    for method in ("forward", "setup_context", "backward"):
        fn = getattr(obj, method, None)
        try:
            fn = inspect.unwrap(fn)
            source = os.path.realpath(inspect.getsourcefile(fn) or "")
            lines, start = inspect.getsourcelines(fn)
        except (TypeError, OSError, ValueError):
            continue
        if source != os.path.realpath(file) or not start <= line < start + len(lines):
            continue
        parsed = parse_code(fn)
        if parsed is not None:
            return method, parsed[0], line - parsed[1] + 1
    return None


def _innermost(tree: ast.AST, line: int):
    """The innermost assert or raise spanning ``line``, and the tree's parent links."""
    parents = {c: n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
    spans = [n for n in ast.walk(tree) if isinstance(n, (ast.Assert, ast.Raise))
             and n.lineno <= line <= (n.end_lineno or n.lineno)]
    return (min(spans, key=lambda n: (n.end_lineno or n.lineno) - n.lineno) if spans
            else None), parents


def _guard(node: ast.AST, parents: dict) -> ast.If | None:
    """The ``if`` a raise sits under (in its body or else branch), within one function."""
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If):
            return node
        if isinstance(node, (ast.FunctionDef, ast.Lambda, ast.For, ast.While, ast.Try)):
            return None
    return None


def _in_else(node: ast.AST, guard: ast.If, parents: dict) -> bool:
    """Whether ``node`` sits in ``guard``'s else branch (an ``elif`` is one)."""
    while parents.get(node) is not guard:
        node = parents[node]
    return node in guard.orelse


def _options_read(obj: type, method: str, tree: ast.AST, test: ast.AST,
                  plain: set[str]) -> list[str] | None:
    """The options (forward parameters holding a plain value in this set) ``test`` reads, or
    None when it reads anything else of the call: a tensor, a local computed in the method,
    a ctx attribute forward did not set from an argument."""
    names = forward_parameters(obj)
    stored: dict[str, str] = {}
    for tree_of in method_trees(obj).values():
        if tree_of is not None:
            stored.update(stored_on_ctx(tree_of, names))
    local = {n: n for n in names} if method == "forward" else {}
    bound = _bound(tree)
    for node in ast.walk(tree):  # reduce = ctx.reduce: the local stands for the parameter
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(
                node.targets[0], ast.Name) and read_parameter(node.value, {}, stored):
            local[node.targets[0].id] = stored[node.value.attr]
    read: list[str] = []
    ctx_parts = {n.value for n in ast.walk(test) if isinstance(n, ast.Attribute)
                 and isinstance(n.value, ast.Name) and n.value.id == "ctx"}
    for node in ast.walk(test):
        if isinstance(node, ast.Attribute) and node.value in ctx_parts:
            param = stored.get(node.attr)
        elif isinstance(node, ast.Name) and node not in ctx_parts:
            param = local.get(node.id)
            if param is None and node.id not in bound:
                continue  # a global or builtin: a constant of the code (torch, isinstance)
        else:
            continue
        if param is None or param not in plain:
            return None  # data or state, not an option
        read.append(param)
    return list(dict.fromkeys(read))


def _bound(tree: ast.AST) -> set[str]:
    """Names the method binds: its parameters and every name it assigns."""
    out = {a.arg for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.Lambda))
           for a in (*n.args.posonlyargs, *n.args.args, *n.args.kwonlyargs)}
    out |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Store)}
    return out
