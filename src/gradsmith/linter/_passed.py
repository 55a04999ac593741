"""Functions a Function is handed at its call sites and keeps on ctx: ``forward(ctx, x,
act_bwd)`` with ``ctx.act_bwd = act_bwd``, called ``Fn.apply(x, swiglu_backward)``, then
``ctx.act_bwd(g, gate, up)`` in backward runs ``swiglu_backward``. The linted calls of
``Fn.apply`` say which functions; each is resolved in its caller's module."""

from __future__ import annotations

import ast

from gradsmith.linter._callsites import linted_applies
from gradsmith.linter._symbols import dotted


def passed_callees(facts, method, call: ast.Call) -> list[tuple[ast.expr, object]]:
    """(the argument expression, the symbols of the caller's module) for each linted
    ``Fn.apply(...)`` call that passes a function ``call`` runs through ctx: ``ctx.fn(...)``
    or a local bound once to ``ctx.fn`` (``fn = ctx.fn``)."""
    attr = _ctx_attribute(call.func, facts.ctx_of(method), method.node)
    if attr is None:
        return []
    index = _kept_parameter(facts, attr)
    if index is None:
        return []
    found = []
    for node, sym in linted_applies(facts.fc.name, facts.sym_of.values()):
        if any(isinstance(a, ast.Starred) for a in node.args[:index + 1]):
            continue
        if index < len(node.args) and dotted(node.args[index]):
            found.append((node.args[index], sym))
    return found


def _ctx_attribute(func: ast.expr, ctx: str | None, method: ast.AST) -> str | None:
    if ctx is None:
        return None
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
            and func.value.id == ctx:
        return func.attr
    if not isinstance(func, ast.Name):
        return None
    table = method.__dict__.get("_gs_ctx_locals")
    if table is None:  # once per method: name -> what each assignment binds it to
        table = {}
        for sub in ast.walk(method):
            if isinstance(sub, ast.Assign):
                for t in sub.targets:
                    if isinstance(t, ast.Name):
                        table.setdefault(t.id, []).append(sub.value)
        method.__dict__["_gs_ctx_locals"] = table
    values = table.get(func.id, ())
    if len(values) == 1 and isinstance(values[0], ast.Attribute) and isinstance(
            values[0].value, ast.Name) and values[0].value.id == ctx:
        return values[0].attr
    return None


def _kept_parameter(facts, attr: str) -> int | None:
    """The position of the forward input kept as ``ctx.<attr> = <input>`` (forward-style
    Functions; the only assignment of that attribute)."""
    forward = facts.method("forward")
    inputs = facts.inputs
    if forward is None or inputs is None or facts.fc.setup_style:
        return None
    table = forward.node.__dict__.get("_gs_ctx_kept")
    if table is None:  # once per forward: ctx attribute -> values assigned to it
        ctx = facts.ctx_of(forward)
        table = {}
        for sub in ast.walk(forward.node):
            if isinstance(sub, ast.Assign):
                for t in sub.targets:
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) \
                            and t.value.id == ctx:
                        table.setdefault(t.attr, []).append(sub.value)
        forward.node.__dict__["_gs_ctx_kept"] = table
    kept = table.get(attr, ())
    if len(kept) != 1 or not isinstance(kept[0], ast.Name) or kept[0].id not in inputs[0]:
        return None
    return inputs[0].index(kept[0].id)


def passed_helper(facts, method):
    """``call -> (def, module symbols) | None``: the linted function a ``ctx.fn(...)`` call
    of ``method`` runs (the first call site's that resolves), for the in-place helpers."""
    from gradsmith.linter._kernels import finder

    def resolve(call: ast.Call):
        for arg, caller in passed_callees(facts, method, call):
            find = finder(caller, facts.sym_of)
            node = find(arg)
            if isinstance(node, ast.FunctionDef):
                return node, find.owner(node) or caller
        return None

    return resolve


def handed_modules(fc, symbols, modules_of) -> set[str]:
    """For the large-tree pre-filter: the modules of the functions the linted calls of
    ``fc.apply`` pass, when ``fc``'s backward calls through ctx (``ctx.act_bwd(...)`` or a
    local bound to a ctx attribute). ``modules_of(sym, parts)`` lists the modules a dotted
    name of ``sym`` may come from."""
    backward = fc.methods.get("backward")
    if backward is None or not backward.params:
        return set()
    ctx = backward.params[0]
    through = any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
        and isinstance(n.func.value, ast.Name) and n.func.value.id == ctx
        or isinstance(n, ast.Assign) and isinstance(n.value, ast.Attribute)
        and isinstance(n.value.value, ast.Name) and n.value.value.id == ctx
        for n in ast.walk(backward.node))
    if not through:
        return set()
    found: set[str] = set()
    for node, sym in linted_applies(fc.name, symbols):
        for arg in node.args:
            parts = dotted(arg)
            if parts:
                found.update(modules_of(sym, parts))
    return found


__all__ = ["handed_modules", "passed_callees", "passed_helper"]
