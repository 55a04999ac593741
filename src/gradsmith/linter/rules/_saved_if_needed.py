"""Which save_for_backward slots forward fills only when an input needs a gradient
(``ctx.save_for_backward(w if ctx.needs_input_grad[0] else None, ...)``): backward reads
them as None whenever that input needs none (a frozen weight) while another one does."""

from __future__ import annotations

import ast

from gradsmith.linter._facts import Facts
from gradsmith.linter._flow import walk_shallow
from gradsmith.linter.rules._common import own
from gradsmith.linter.rules._direct import is_none


def needs_test(test: ast.expr, flags: frozenset[str] = frozenset()) -> bool:
    """A test of whether an input wants a gradient: ``ctx.needs_input_grad[i]``,
    ``w.requires_grad``, or a ctx attribute forward set from one (``flags``)."""
    return any(isinstance(n, ast.Attribute) and (
        n.attr in ("needs_input_grad", "requires_grad") or n.attr in flags
        and isinstance(n.value, ast.Name)) for n in ast.walk(test))


def saved_if_needed(facts: Facts) -> tuple[dict[int, str], frozenset[str]]:
    """save_for_backward position -> the test (source) without which forward saves None
    there (empty unless forward saves exactly once), and the ctx attributes forward sets
    from a needs-gradient test (``ctx.weight_requires_grad = weight.requires_grad``)."""
    out: dict[int, str] = {}
    calls = 0
    every: frozenset[str] = frozenset()
    for method in own(facts, "forward", "setup_context"):
        ctx = facts.ctx_of(method)
        nodes = list(walk_shallow(method.node))
        flags = frozenset(t.attr for n in nodes if isinstance(n, ast.Assign)
                          and needs_test(n.value) for t in n.targets
                          if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                          and t.value.id == ctx)
        every |= flags
        binds: dict[str, list[ast.expr]] = {}
        for node in nodes:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(
                    node.targets[0], ast.Name):
                name = node.targets[0].id
                binds[name] = node.value if name not in binds else None
        for node in nodes:
            args = facts.saved_args(node, ctx) if isinstance(node, ast.Call) else None
            if args is None:
                continue
            calls += 1
            if len(args) == 1 and isinstance(args[0], ast.Starred) and isinstance(
                    args[0].value, ast.Name) and isinstance(
                    binds.get(args[0].value.id), (ast.List, ast.Tuple)):
                args = binds[args[0].value.id].elts  # `ctx.save_for_backward(*saved)`
            for i, arg in enumerate(args):
                if isinstance(arg, ast.Starred):
                    break
                if isinstance(arg, ast.IfExp) and needs_test(arg.test, flags) and (
                        is_none(arg.body) or is_none(arg.orelse)):
                    out[i] = ast.unparse(arg.test)
    return out if calls == 1 else {}, every


def unpacked(stmt: ast.stmt, ctx: str | None) -> list[tuple[int, str]]:
    """(slot, name) pairs a statement binds from ``ctx.saved_tensors``."""
    if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1 or ctx is None:
        return []
    target, value = stmt.targets[0], stmt.value

    def saved(expr: ast.expr) -> bool:
        return isinstance(expr, ast.Attribute) and expr.attr in (
            "saved_tensors", "saved_variables") and isinstance(
            expr.value, ast.Name) and expr.value.id == ctx

    if isinstance(target, (ast.Tuple, ast.List)) and saved(value):
        out = []
        for i, elt in enumerate(target.elts):
            if isinstance(elt, ast.Starred):
                break
            if isinstance(elt, ast.Name):
                out.append((i, elt.id))
        return out
    if isinstance(target, ast.Name) and isinstance(value, ast.Subscript) and saved(
            value.value) and isinstance(value.slice, ast.Constant) and isinstance(
            value.slice.value, int) and value.slice.value >= 0:
        return [(value.slice.value, target.id)]
    return []


__all__ = ["needs_test", "saved_if_needed", "unpacked"]
