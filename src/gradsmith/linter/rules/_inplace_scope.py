"""Which in-place edits the in-place rules should not call errors: writes chosen by an
explicit option (``inplace=True``, ``x if inplace else ...``, a kernel's ``IN_PLACE=`` flag)
and shape changes of a local view object (``v = x.view(-1); v.unsqueeze_(0)``)."""

from __future__ import annotations

import ast
import re

OPTION = "`inplace=True`"


def option(what: str) -> bool:
    """A write chosen by an explicit option: ``inplace=True``, a kernel launch flag, or a
    statement/target selected by an ``inplace`` argument."""
    return what == OPTION or "=` of kernel" in what or what.endswith("(`inplace` option)")


_INPLACE_WORD = re.compile(r"in_?place", re.I)


def chosen_by_option(func: ast.AST, source=None) -> tuple[set[int], set[str]]:
    """Statements under ``if <...inplace...>:`` and names bound by ``x if inplace else ...``
    (``source``: the file; one never spelling "inplace" is not walked, asked once per file)."""
    stmts: set[int] = set()
    names: set[str] = set()
    if source is not None:
        spelled = source.__dict__.get("_gs_inplace_word")
        if spelled is None:
            low = source.text.lower()
            spelled = source.__dict__["_gs_inplace_word"] = "inplace" in low or "in_place" in low
        if not spelled:
            return stmts, names
    for node in ast.walk(func):
        if isinstance(node, ast.If) and _INPLACE_WORD.search(ast.unparse(node.test)):
            for sub in (*node.body, *node.orelse):
                stmts.update(id(n) for n in ast.walk(sub) if isinstance(n, ast.stmt))
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.IfExp) \
                and _INPLACE_WORD.search(ast.unparse(node.value.test)):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return stmts, names


def chosen_out(kw: ast.keyword) -> ast.expr | None:
    """``out=x if inplace else None`` (or ``None if not inplace else x``): ``x``."""
    value = kw.value
    if kw.arg != "out" or not isinstance(value, ast.IfExp) \
            or not _INPLACE_WORD.search(ast.unparse(value.test)):
        return None
    branches = [b for b in (value.body, value.orelse)
                if not (isinstance(b, ast.Constant) and b.value is None)]
    return branches[0] if len(branches) == 1 else None


def by_option(what: str, stmt: ast.stmt, target: ast.expr, chosen) -> str:
    stmts, names = chosen
    if id(stmt) in stmts or isinstance(target, ast.Name) and target.id in names:
        return what if option(what) else f"{what} (`inplace` option)"
    return what




#: In-place ops that change only the shape/strides of the tensor object they are called on.
_VIEW_INPLACE = frozenset({"unsqueeze_", "squeeze_", "transpose_", "t_", "swapdims_",
                           "swapaxes_", "as_strided_"})
#: Calls that always return a new tensor object (a view or a copy), never their receiver.
_NEW_OBJECT = frozenset({"view", "view_as", "reshape", "reshape_as", "transpose", "t", "permute",
                         "expand", "expand_as", "narrow", "squeeze", "unsqueeze", "select",
                         "diagonal", "unfold", "as_strided", "movedim", "moveaxis", "detach",
                         "clone", "unflatten"})


def reshapes_fresh_view(node: ast.AST, target: ast.expr, fresh: set[str]) -> bool:
    """``v = x.view(-1); v.unsqueeze_(0)``: only the local view object changes shape."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
        and node.func.attr in _VIEW_INPLACE and node.func.value is target \
        and isinstance(target, ast.Name) and target.id in fresh


def track_fresh_views(stmt: ast.stmt, fresh: set[str]) -> None:
    if not isinstance(stmt, ast.Assign):
        return
    value = stmt.value
    new = isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) \
        and value.func.attr in _NEW_OBJECT or isinstance(value, ast.Subscript)
    for target in stmt.targets:
        if isinstance(target, ast.Name):
            (fresh.add if new else fresh.discard)(target.id)


def detaches_other(node: ast.AST, target: ast.expr, what: str, method: ast.AST,
                   inputs: set[str]) -> bool:
    """Whether the write is a ``detach_()`` of something other than an input object itself.

    ``detach_`` changes no values: it cuts the graph of the one tensor object it is called
    on. On an input that object is the caller's (a leaf stops requiring grad, a non-leaf
    loses its history: the caller's gradient through it is silently missing), so that stays
    GS101; on a view, a detached copy or the result of a call on them (a reversible block's
    `ctx.fn(*detached)`) no tensor the caller holds changes. Followed only where the call is
    on an input parameter (or an element of one, `args[i]`, `for t in args`) never rebound.
    """
    if "detach_" not in what:
        return False
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.value is target):
        return True  # through a helper: its receiver is out of sight
    stores = [n for n in ast.walk(method) if isinstance(n, ast.Name)
              and isinstance(n.ctx, ast.Store)]
    loops = {n.target.id: n.iter.id for n in ast.walk(method) if isinstance(n, ast.For)
             and isinstance(n.target, ast.Name) and isinstance(n.iter, ast.Name)}
    if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
        target = target.value  # `args[0].detach_()`: an element of an input sequence
    if not isinstance(target, ast.Name):
        return True
    stored = [n.id for n in stores]
    if target.id in loops:  # `for t in args: t.detach_()`, t bound by that loop alone
        return stored.count(target.id) != 1 or loops[target.id] not in inputs \
            or loops[target.id] in stored
    return target.id not in inputs or target.id in stored


__all__ = ["OPTION", "by_option", "chosen_by_option", "chosen_out", "detaches_other", "option",
           "reshapes_fresh_view", "track_fresh_views"]
