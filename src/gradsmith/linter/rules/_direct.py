"""Calls of a Function that bypass or misuse ``apply`` (helpers of the GS111/GS121/GS214
checks): ``Fn.forward(None, ...)`` and where it is harmless, and apply's argument count."""

from __future__ import annotations

import ast

from gradsmith.linter._flow import walk_shallow
from gradsmith.linter._symbols import statements


def unguarded_ctx_use(fc) -> str | None:
    """``ctx.<attr>`` that forward reaches without testing ``ctx`` first, else None."""
    fwd = fc.methods.get("forward")
    if fwd is None or fc.setup_style or not fwd.params:
        return None
    ctx = fwd.params[0]
    for stmt in fwd.node.body:
        if isinstance(stmt, (ast.If, ast.While, ast.Try, ast.With, ast.For)) or isinstance(
            stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        ):
            return None  # from here on, paths depend on tests we do not follow
        for node in walk_shallow(stmt):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.value.id == ctx:
                return f"{ctx}.{node.attr}"
            if isinstance(node, ast.IfExp):
                break
    return None


def is_none(expr: ast.expr) -> bool:
    return isinstance(expr, ast.Constant) and expr.value is None


_NO_GRAD = ("no_grad", "inference_mode")


def _no_grad_expr(expr: ast.expr) -> bool:
    call = expr if isinstance(expr, ast.Call) else None
    head = call.func if call else expr
    name = head.attr if isinstance(head, ast.Attribute) else getattr(head, "id", None)
    if name in _NO_GRAD:
        return not (call and call.args and isinstance(call.args[0], ast.Constant)
                    and call.args[0].value is False)
    return name == "set_grad_enabled" and bool(call and call.args) and isinstance(
        call.args[0], ast.Constant) and call.args[0].value is False


def gradless(src, call: ast.Call) -> bool:
    """Whether ``call`` runs where no gradient can be needed: in a no-grad block or
    function, or on inputs that carry no autograd history (``.detach()``, ``.data``)."""
    spans = src.__dict__.get("_no_grad_spans")
    if spans is None:
        spans = []
        for stmt in statements(src.tree.body):
            if isinstance(stmt, (ast.With, ast.AsyncWith)) and any(
                _no_grad_expr(item.context_expr) for item in stmt.items
            ) or isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                _no_grad_expr(d) for d in stmt.decorator_list
            ):
                spans.append((stmt.lineno, stmt.end_lineno))
        src.__dict__["_no_grad_spans"] = spans
    if any(a <= call.lineno <= b for a, b in spans):
        return True
    rest = call.args[1:]
    return bool(rest) and all(
        isinstance(a, ast.Constant)
        or isinstance(a, ast.Attribute) and a.attr == "data"
        or isinstance(a, ast.Call) and isinstance(a.func, ast.Attribute) and a.func.attr == "detach"
        for a in rest
    )


def check_apply_count(report, src, node: ast.Call, fc) -> None:
    """GS121: ``Fn.apply`` with more positional arguments than forward takes, or fewer
    than it requires (counted only when no ``*args``/``**kwargs`` hide the number)."""
    inputs = fc.inputs()
    if inputs is None or fc.unknown_base or node.keywords or any(
        isinstance(a, ast.Starred) for a in node.args
    ):
        return
    params, ndefault, vararg = inputs
    given, required = len(node.args), len(params) - ndefault
    if given < required:
        report("GS121", src, node, f"{given} argument(s), forward requires {required}")
    elif given > len(params) and not vararg:
        report("GS121", src, node, f"{given} argument(s), forward takes at most {len(params)}")


__all__ = ["check_apply_count", "gradless", "is_none", "unguarded_ctx_use"]
