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
    if not last.orelse and _kept_grad_guard(last.test, facts, backward, forward):
        return True
    tests = _chain_tests(last)
    fwd_body = forward.node.body
    return bool(fwd_body) and isinstance(fwd_body[-1], ast.If) and not terminates(fwd_body) \
        and _chain_tests(fwd_body[-1]) == tests


def _kept_grad_guard(test: ast.expr, facts: Facts, backward, forward) -> bool:
    """``if grad_output is not None and grads is not None: return grads * g, None``, where
    forward saved ``grads = ... if acts.requires_grad else None`` and ``acts`` is the one
    input backward ever returns a gradient for: the test fails only when ``acts`` needs no
    gradient, and then no input backward differentiates does, so backward does not run
    (numba RNN-T losses). ``grad_output`` is never None unless forward turns off
    ``ctx.set_materialize_grads``."""
    conjuncts = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) \
        else [test]
    saved = _saved_names(backward, facts.ctx_of(backward))
    kept = _kept_for(forward, facts.ctx_of(forward))
    grads = {a.arg for a in backward.node.args.args[1:]}
    materialized = "set_materialize_grads" not in ast.unparse(forward.node) + ast.unparse(
        backward.node)
    inputs = set()
    for part in conjuncts:
        name = _not_none(part)
        if name in grads and materialized:
            continue
        if name not in saved or saved[name] not in kept:
            return False
        inputs.add(kept[saved[name]])
    return len(inputs) == 1 and _gradient_slots(backward) == inputs


def _not_none(test: ast.expr) -> str | None:
    """``x is not None`` (or a bare ``x``): the name tested."""
    if isinstance(test, ast.Name):
        return test.id
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(
            test.ops[0], ast.IsNot) and isinstance(test.left, ast.Name) and isinstance(
            test.comparators[0], ast.Constant) and test.comparators[0].value is None:
        return test.left.id
    return None


def _saved_names(backward, ctx: str | None) -> dict[str, int]:
    """Names backward unpacks from ``ctx.saved_tensors`` -> their position."""
    found: dict[str, int] = {}
    for stmt in backward.node.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and attr_of(
                stmt.value, ctx, "saved_tensors"):
            target = stmt.targets[0]
            if isinstance(target, (ast.Tuple, ast.List)):
                found.update((e.id, i) for i, e in enumerate(target.elts)
                             if isinstance(e, ast.Name))
    return found


def _kept_for(forward, ctx: str | None) -> dict[int, int]:
    """Saved positions whose tensor is None exactly when an input needs no gradient:
    ``grads = <tensor> if acts.requires_grad else None`` -> {position: input index}."""
    params = [a.arg for a in forward.node.args.args[1:]]
    saves = [n for n in ast.walk(forward.node) if isinstance(n, ast.Call)
             and attr_of(n.func, ctx, "save_for_backward")]
    if len(saves) != 1:
        return {}
    found = {}
    for pos, arg in enumerate(saves[0].args):
        if not isinstance(arg, ast.Name):
            continue
        sources = {_requires_grad_or_none(n.value, params) for n in ast.walk(forward.node)
                   if isinstance(n, ast.Assign) and any(
                       isinstance(t, ast.Name) and t.id == arg.id for t in n.targets)}
        if len(sources) == 1 and None not in sources:
            found[pos] = sources.pop()
    return found


def _requires_grad_or_none(value: ast.expr, params: list[str]) -> int | None:
    """The input index ``i`` of ``<tensor> if params[i].requires_grad else None``."""
    if not (isinstance(value, ast.IfExp) and isinstance(value.orelse, ast.Constant)
            and value.orelse.value is None and not (
                isinstance(value.body, ast.Constant) and value.body.value is None)):
        return None
    flag = value.test
    if isinstance(flag, ast.Attribute) and flag.attr == "requires_grad" and isinstance(
            flag.value, ast.Name) and flag.value.id in params:
        return params.index(flag.value.id)
    return None


def _gradient_slots(backward) -> set[int] | None:
    """Positions of the gradients backward's returns give that are not a literal None."""
    slots: set[int] = set()
    for node in ast.walk(backward.node):
        if isinstance(node, ast.Return) and node.value is not None:
            items = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
            if any(isinstance(e, ast.Starred) for e in items):
                return None
            slots.update(i for i, e in enumerate(items)
                         if not (isinstance(e, ast.Constant) and e.value is None))
    return slots


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


_UNKNOWN = object()
_RAISE_DEPTH = 3


def raising_calls(facts: Facts, method):
    """``raising(call)`` for :func:`terminates`: whether a call statement of ``method``
    always raises, read in the linted code (a helper of the module, the class or another
    linted module): its body raises on every path once the call's literal arguments are
    bound (``log_and_assert(False, logger, msg)`` whose body is ``if not cond: ...;
    assert cond, msg``), following such calls three helpers deep. Anything not linted or
    not decided by literals does not count: GS109 keeps a fall-through that can happen."""
    from gradsmith.linter._helpers import Helpers
    from gradsmith.linter._kernels import finder

    helpers = Helpers(facts.fc.source, facts.fc.node, facts.resolver(method), None,
                      finder(facts.sym_of[id(facts.fc.source)], facts.sym_of), facts.sym_of)

    def raising(call: ast.Call, env: dict | None = None, depth: int = 0) -> bool:
        found = helpers.target(call) if depth < _RAISE_DEPTH else None
        if found is None:
            return False
        node, bound = found
        args = node.args
        params = [a.arg for a in (*args.posonlyargs, *args.args)][bound:]
        if any(isinstance(a, ast.Starred) for a in call.args) or len(call.args) > len(params):
            return False
        known = {p: _literal(a, env or {}) for p, a in zip(params, call.args)}
        known.update((k.arg, _literal(k.value, env or {})) for k in call.keywords if k.arg)
        return _always_raises(node.body, known, lambda c, e: raising(c, e, depth + 1))

    return raising


def _literal(expr: ast.expr, env: dict):
    """The value of a literal (or of ``not``/a name bound to one), else ``_UNKNOWN``."""
    if isinstance(expr, ast.Constant):
        return expr.value
    if isinstance(expr, ast.Name):
        return env.get(expr.id, _UNKNOWN)
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
        value = _literal(expr.operand, env)
        return _UNKNOWN if value is _UNKNOWN else not value
    return _UNKNOWN


def _always_raises(body: list[ast.stmt], env: dict, raising) -> bool:
    """Whether every path through a helper's ``body`` raises, given literal ``env``."""
    for stmt in body:
        if isinstance(stmt, ast.Return):
            return False
        if isinstance(stmt, ast.Raise):
            return True
        if isinstance(stmt, ast.Assert):
            test = _literal(stmt.test, env)
            if test is not _UNKNOWN and not test:
                return True
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and \
                raising(stmt.value, env):
            return True
        if isinstance(stmt, ast.If):
            test = _literal(stmt.test, env)
            if test is _UNKNOWN:
                if _always_raises(stmt.body, env, raising) and \
                        _always_raises(stmt.orelse, env, raising):
                    return True
            elif _always_raises(stmt.body if test else stmt.orelse, env, raising):
                return True
            elif any(isinstance(n, ast.Return) for n in ast.walk(stmt)):
                return False  # the branch taken may return
        elif isinstance(stmt, (ast.For, ast.While, ast.Try, ast.With, ast.Match)) and any(
                isinstance(n, ast.Return) for n in ast.walk(stmt)):
            return False
        if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            for target in ast.walk(stmt):  # a rebound name is no longer the literal
                if isinstance(target, ast.Name) and isinstance(target.ctx, ast.Store):
                    env = {**env, target.id: _UNKNOWN}
    return False
