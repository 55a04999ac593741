"""GS240's reading of names that are None unless an input needs a gradient: ``dw = None``
then ``if ctx.needs_input_grad[1]: dw = ...``, ``dx = ... if needs_grad else None``, or a
tensor forward saves only under such a test; the first unguarded read of one is reported."""

from __future__ import annotations

import ast

from gradsmith.linter._flow import walk_shallow
from gradsmith.linter.rules._common import short
from gradsmith.linter.rules._direct import is_none
from gradsmith.linter.rules._saved_if_needed import needs_test, unpacked


def needed_only(method, report, find=None, saved=({}, frozenset()), ctx=None) -> None:
    """``dw = None``, then ``if ctx.needs_input_grad[1]: dw = ...`` (no else), then
    ``dw.to(...)`` with no test of ``dw`` in between: at backward's top level, the read
    raises AttributeError whenever that input needs no gradient (a frozen weight) while
    another one does. So does a saved tensor that forward saves only under such a test
    (``saved``: slot -> test, and the ctx attributes holding one)."""
    slots, flags = saved
    nulls: set[str] = set()
    maybe: dict[str, str] = {}
    local: set[str] = set()  # names holding a needs-gradient test
    when = "a frozen input" if method.name == "backward" else \
        "no input requires grad: inference on frozen or detached tensors"

    def needs(test: ast.expr) -> bool:
        return needs_test(test, flags) or any(
            isinstance(n, ast.Name) and n.id in local or isinstance(n, ast.Call)
            and _returns_needs(n, find) for n in ast.walk(test))
    for stmt in method.node.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        stored = stored_names(stmt)
        if isinstance(stmt, ast.Assign) and is_none(stmt.value) and all(
                isinstance(t, ast.Name) for t in stmt.targets):
            names = {t.id for t in stmt.targets}
            nulls |= names
            for name in names:
                maybe.pop(name, None)
            continue
        if isinstance(stmt, ast.If) and not stmt.orelse and needs(stmt.test) \
                and not _leaves(stmt.body):
            test = ast.unparse(stmt.test)
            for name in stored & nulls:
                maybe[name] = test
            nulls -= stored
            continue
        if isinstance(stmt, (ast.If, ast.While)) and needs(stmt.test) and _leaves(
                stmt.body):
            maybe.clear()  # `if not ctx.needs_input_grad[1]: return ...`
        for name in list(maybe):
            if name in _guarded(stmt):
                del maybe[name]
        for sub in ast.walk(stmt):
            if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) \
                    and sub.value.id in maybe and not sub.attr.startswith("__"):
                name = sub.value.id
                report("GS240", method.source, sub,
                       f"`{name}.{sub.attr}`: `{name}` is None unless `{short(maybe[name])}` "
                       f"({when})")
                del maybe[name]
            elif isinstance(sub, ast.AugAssign) and isinstance(sub.target, ast.Name) \
                    and sub.target.id in maybe:
                name = sub.target.id
                op = ast.unparse(sub).split("=", 1)[0].split(name, 1)[-1].strip()
                report("GS240", method.source, sub,
                       f"`{name} {op}=` on None (TypeError) unless `{short(maybe[name], 20)}`")
                del maybe[name]
            elif isinstance(sub, ast.Call) and find is not None and maybe:
                for arg, read in _helper_reads(sub, maybe, find):
                    report("GS240", method.source, arg,
                           f"`{arg.id}` (None unless `{short(maybe[arg.id], 30)}`) reaches "
                           f"`{short(read, 30)}`")
                    del maybe[arg.id]
        nulls -= stored
        for name in stored:
            maybe.pop(name, None)
        for slot, name in unpacked(stmt, ctx):
            if slot in slots:
                maybe[name] = slots[slot]
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(
                stmt.targets[0], ast.Name):
            value, name = stmt.value, stmt.targets[0].id
            if isinstance(value, ast.IfExp) and needs(value.test) and (
                    is_none(value.orelse) or is_none(value.body)):
                maybe[name] = ast.unparse(value.test) if is_none(value.orelse) else \
                    f"not ({ast.unparse(value.test)})"
            elif needs(value):
                local.add(name)


def _returns_needs(call: ast.Call, find) -> bool:
    """A linted helper whose every return is a needs-gradient test
    (``return any(ctx.needs_input_grad)``)."""
    helper = find(call.func) if find is not None and isinstance(
        call.func, (ast.Name, ast.Attribute)) else None
    if not isinstance(helper, ast.FunctionDef):
        return False
    returns = [n for n in walk_shallow(helper) if isinstance(n, ast.Return)]
    return bool(returns) and all(r.value is not None and needs_test(r.value) for r in returns)


def _helper_reads(call: ast.Call, maybe: dict, find) -> list[tuple[ast.Name, str]]:
    """(argument, the attribute read) for each name of ``maybe`` passed by position to a
    linted helper whose body reads an attribute of that parameter before any statement
    tests or rebinds it (``n, k = parallel_dw.shape`` as its first line)."""
    args = [(i, a) for i, a in enumerate(call.args) if isinstance(a, ast.Name)
            and a.id in maybe]
    if not args or any(isinstance(a, ast.Starred) for a in call.args):
        return []
    helper = find(call.func) if isinstance(call.func, (ast.Name, ast.Attribute)) else None
    if not isinstance(helper, ast.FunctionDef) or helper.args.posonlyargs:
        return []
    params = [a.arg for a in helper.args.args]
    found = []
    for index, arg in args:
        if index < len(params):
            read = _first_read(helper.body, params[index])
            if read is not None:
                found.append((arg, f"{helper.name}(): {read}"))
    return found


def _first_read(body: list[ast.stmt], name: str) -> str | None:
    """``name.attr`` read by a plain top-level statement of ``body`` before any statement
    tests, rebinds or branches on anything."""
    for stmt in body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue  # the docstring
        if not isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr,
                                 ast.Return)) or name in _guarded(stmt):
            return None
        for sub in ast.walk(stmt):
            if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) \
                    and sub.value.id == name and not sub.attr.startswith("__"):
                return f"{name}.{sub.attr}"
        if name in stored_names(stmt):
            return None
    return None


def _leaves(body: list[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], (ast.Return, ast.Raise, ast.Continue,
                                                ast.Break))


def _guarded(stmt: ast.stmt) -> set[str]:
    """Names a statement tests (``x is None``, ``if x:``, ``a if x is not None else b``,
    ``x and x.shape``): a read there may be guarded."""
    tests: list[ast.AST] = []
    for sub in ast.walk(stmt):
        if isinstance(sub, (ast.If, ast.While, ast.IfExp, ast.Assert)):
            tests.append(sub.test)
        elif isinstance(sub, ast.BoolOp):
            tests.extend(sub.values[:-1])
        elif isinstance(sub, ast.Compare):
            tests.append(sub)
        elif isinstance(sub, ast.comprehension):
            tests.extend(sub.ifs)
    return {n.id for t in tests for n in ast.walk(t) if isinstance(n, ast.Name)}


def stored_names(stmt: ast.stmt) -> frozenset[str]:
    return frozenset(n.id for n in ast.walk(stmt)
                     if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))


__all__ = ["needed_only", "stored_names"]
