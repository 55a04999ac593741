"""A forward error that comes from ctx's fresh state, not from the arguments (private).

``Function.apply`` hands forward a new ctx on every call. Until forward stores something on it,
that ctx is the same whatever the inputs: ``ctx.saved_tensors`` is empty and an attribute
forward never set does not exist. So ``a, b = ctx.saved_tensors`` as forward's first statement
raises ``ValueError`` on every call (corpus 11c dev: torch3d's ``ChamferDistance`` defines
``forward`` twice and no backward; the second definition, the intended backward, replaces the
forward and unpacks the empty saved tensors). Such an error is the Function's defect, and a row
that skips it hides it.

An error counts only when all of these hold (read from the traceback and forward's AST; the
caller, :func:`gradsmith.discovery.input_free.input_free`, checked the frame is forward's own):

- its type is ``ValueError``, ``IndexError``, ``AttributeError`` or ``TypeError``;
- forward's first parameter is ctx, and no statement before the raising one names ctx (nothing
  was saved, set or marked on it, and it was handed to no helper): ctx is still fresh;
- the raising statement is a direct statement of forward reached on every call, and the value
  it computes reads ctx only through ``saved_tensors`` (empty in forward) or an attribute the
  error names as missing, and otherwise only literals, builtins and library modules.
"""

from __future__ import annotations

import ast
import types

from gradsmith.discovery.source import function_def

_TYPES = (ValueError, IndexError, AttributeError, TypeError)
#: What a fresh ctx holds that forward may read: nothing has been saved yet.
_EMPTY = frozenset({"saved_tensors", "saved_variables"})


def fresh_ctx_error(exc: BaseException, frame: types.FrameType, line: int,
                    constant) -> dict | None:
    """``{"call", "code", "line", "ctx_read"}`` when forward's ``exc`` (raised at ``line`` of
    ``frame``) comes from a still-fresh ctx (see the module's rules), else None.
    ``constant(name, frame)`` says whether a name is a builtin or a library module."""
    code = frame.f_code
    if not isinstance(exc, _TYPES) or code.co_argcount < 1:
        return None
    ctx = code.co_varnames[0]
    body = function_def(code)
    if body is None:
        return None
    tree, start = body
    stmt = _statement(tree.body, line - start + 1, ctx)
    if stmt is None:
        return None
    value = stmt.value if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.Expr, ast.Return)) \
        else None
    if value is None:
        return None
    missing = getattr(exc, "name", None) if isinstance(exc, AttributeError) else None
    reads = _ctx_reads(value, ctx, frame, constant, missing)
    if not reads:
        return None
    return {"call": ast.unparse(value), "code": ast.unparse(stmt), "line": line,
            "ctx_read": reads}


def _statement(body: list[ast.stmt], line: int, ctx: str) -> ast.stmt | None:
    """The direct statement of forward at ``line``, when every statement before it leaves
    ctx untouched and none can return; None otherwise."""
    for stmt in body:
        if stmt.lineno <= line <= (stmt.end_lineno or stmt.lineno):
            return None if isinstance(stmt, ast.Raise) else stmt
        for node in ast.walk(stmt):
            if isinstance(node, ast.Return) or (isinstance(node, ast.Name) and node.id == ctx):
                return None  # some input may return first, or ctx is no longer fresh
    return None


def _ctx_reads(value: ast.expr, ctx: str, frame: types.FrameType, constant,
               missing: str | None) -> list[str]:
    """The ctx attributes ``value`` reads, when it reads nothing else of forward's (each
    attribute empty in forward, or the one the error names as missing); [] otherwise."""
    reads: list[str] = []
    attributes = {id(n.value): n for n in ast.walk(value)
                  if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)}
    for node in ast.walk(value):
        if isinstance(node, (ast.Lambda, ast.comprehension, ast.NamedExpr, ast.Starred)):
            return []
        if not isinstance(node, ast.Name):
            continue
        if node.id == ctx:
            attr = attributes.get(id(node))
            if attr is None or (attr.attr not in _EMPTY and attr.attr != missing):
                return []  # ctx handed over whole, or an attribute a fresh ctx may hold
            reads.append(f"{ctx}.{attr.attr}")
        elif node.id in frame.f_code.co_varnames or not constant(node.id, frame):
            return []
    return reads
