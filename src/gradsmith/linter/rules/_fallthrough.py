"""What the backward-count rules (GS108, GS109) must not call errors: a fall-through that
runs only when backward cannot, and tuples built with ``+``/``* n`` padded with Nones."""

from __future__ import annotations

import ast

from gradsmith.linter._facts import Facts
from gradsmith.linter.rules._common import attr_of, terminates


def not_none_beyond(value: ast.expr | None, count: int) -> bool:
    """Whether a returned sequence has something other than None after ``count`` items
    (autograd accepts extra trailing Nones)."""
    items = _items(value)
    return items is not None and any(
        not (isinstance(e, ast.Constant) and e.value is None) for e in items[count:])


def _items(node: ast.expr | None, depth: int = 0) -> list[ast.expr] | None:
    """Item expressions of ``(a, b)``, ``tuple([None] * 6 + [g])`` and the like."""
    if node is None or depth > 20:
        return None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "tuple" \
            and len(node.args) == 1:
        return _items(node.args[0], depth + 1)
    if isinstance(node, (ast.Tuple, ast.List)):
        return None if any(isinstance(e, ast.Starred) for e in node.elts) else list(node.elts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _items(node.left, depth + 1), _items(node.right, depth + 1)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        seq, times = (node.right, node.left) if isinstance(node.left, ast.Constant) else (
            node.left, node.right)
        items = _items(seq, depth + 1)
        if items is not None and isinstance(times, ast.Constant) and type(times.value) is int:
            return items * max(times.value, 0)
    return None


def idle_fallthrough(facts: Facts, backward, forward, total: int) -> bool:
    """Whether backward can only fall off its end when it never runs.

    Two shapes: the last statement is ``if <some input needs a gradient>: ... return``
    (backward runs only when one does), or an ``if``/``elif`` chain whose tests are the
    same as a chain in forward that also falls through without a return (forward then
    returns None, so there is no output to differentiate).
    """
    body = backward.node.body
    last = body[-1] if body else None
    if not isinstance(last, ast.If) or not terminates(last.body):
        return False
    if not _terminates_or_idle(last.orelse, backward, facts, total):
        return False
    if _needs_some_grad(last.test, facts.ctx_of(backward), total):
        return True
    tests = _chain_tests(last)
    fwd_body = forward.node.body
    return bool(fwd_body) and isinstance(fwd_body[-1], ast.If) and not terminates(fwd_body) \
        and _chain_tests(fwd_body[-1]) == tests


def _terminates_or_idle(body: list[ast.stmt], backward, facts: Facts, total: int) -> bool:
    if not body or terminates(body):
        return True
    last = body[-1]
    return len(body) == 1 and isinstance(last, ast.If) and terminates(last.body) and \
        _terminates_or_idle(last.orelse, backward, facts, total)


def _chain_tests(node: ast.If) -> list[str]:
    tests = [ast.unparse(node.test)]
    while len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
        node = node.orelse[0]
        tests.append(ast.unparse(node.test))
    return tests


def _needs_some_grad(test: ast.expr, ctx: str | None, total: int) -> bool:
    """``any(ctx.needs_input_grad)`` or ``ctx.needs_input_grad[0] or ... [n-1]``: true
    whenever backward runs (autograd calls it only when some input needs a gradient)."""
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and test.func.id == "any" \
            and len(test.args) == 1 and attr_of(test.args[0], ctx, "needs_input_grad"):
        return True
    flags = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or) else [test]
    seen = set()
    for flag in flags:
        if not (isinstance(flag, ast.Subscript) and attr_of(flag.value, ctx, "needs_input_grad")
                and isinstance(flag.slice, ast.Constant) and isinstance(flag.slice.value, int)):
            return False
        seen.add(flag.slice.value % total if total else flag.slice.value)
    return total > 0 and seen == set(range(total))


__all__ = ["idle_fallthrough", "not_none_beyond"]
