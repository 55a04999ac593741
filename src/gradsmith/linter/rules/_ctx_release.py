"""GS234, GS235: what backward releases of the state forward kept on ctx: an output (the
GS104 cycle, broken whenever backward runs), and state a second backward needs again."""

from __future__ import annotations

import ast

from gradsmith.linter._facts import Facts
from gradsmith.linter._registry import Rule, checker
from gradsmith.linter.rules._common import CTX_METHODS, attr_of, own, short

_H = "import torch\n\n\nclass Fn(torch.autograd.Function):\n    @staticmethod\n"
_B = "\n    @staticmethod\n    def backward(ctx, g):\n"
GS234 = Rule(
    "GS234", "ctx-attr-output-released", "warning",
    "An output tensor is kept on ctx and backward releases it (`ctx.outs = [out]` then "
    "`ctx.outs.pop()`, `del ctx.out`, `ctx.out = None`)",
    "The output holds the graph node that holds ctx, a reference cycle (GS104); backward "
    "breaks it every time it runs, so a differentiated graph is freed. Only a graph that is "
    "built and never differentiated (an evaluation pass with gradients enabled) stays alive "
    "until the cycle collector runs: memory held longer, no wrong result.",
    "use `ctx.save_for_backward(out)` and read it back with `ctx.saved_tensors`, or run "
    "graph-less passes under `torch.no_grad()`.",
    bad=_H + "    def forward(ctx, x):\n        out = x.exp()\n        ctx.outs = [out]  # GS234\n"
    "        return out\n" + _B + "        out = ctx.outs.pop()\n        return g * out\n",
    good=_H + "    def forward(ctx, x):\n        out = x.exp()\n        ctx.save_for_backward(out)\n"
    "        return out\n" + _B + "        (out,) = ctx.saved_tensors\n        return g * out\n",
    brief="output kept on ctx, released by backward",
)


GS235 = Rule(
    "GS235", "backward-consumes-ctx", "warning",
    "backward deletes or pops state forward kept on ctx (`del ctx.x`, `delattr(ctx, 'x')`, "
    "`ctx.xs.pop()`)",
    "A graph kept with `retain_graph=True` (or differentiated twice with "
    "`torch.autograd.grad`) runs the same backward again on the same ctx: the state is "
    "gone, so the second backward raises AttributeError or IndexError, a message that says "
    "nothing about the cause. A backward that checks the state first and raises its own "
    "clear error (\"Trying to perform backward ... more than once\") is deliberate and "
    "not reported.",
    "read the state without consuming it (`ctx.x`, `ctx.xs[-1]`), keep tensors with "
    "`ctx.save_for_backward`, or check it and raise a clear error for a second backward.",
    bad=_H + "    def forward(ctx, x):\n        ctx.scale = 2.0\n        return x * 2\n" + _B
    + "        scale = ctx.scale\n        del ctx.scale  # GS235\n        return g * scale\n",
    good=_H + "    def forward(ctx, x):\n        ctx.scale = 2.0\n        return x * 2\n" + _B
    + "        return g * ctx.scale\n",
    brief="backward consumes ctx state: a second backward raises",
)


def released_attrs(facts: Facts) -> dict[str, str]:
    """ctx attributes backward releases on every path: ``"drop"`` (``del ctx.a``,
    ``delattr(ctx, "a")``, ``ctx.a = None``, ``ctx.a.clear()``) or ``"pop"``
    (``ctx.a.pop()``, which releases a one-item list). Only statements at the top level of
    backward's body count (a release under a condition may not run)."""
    backward = facts.method("backward")
    if backward is None:
        return {}
    out: dict[str, str] = {}
    for attr, how, _node in _top_releases(backward, facts.ctx_of(backward)):
        if out.get(attr) != "drop":
            out[attr] = "pop" if how == "pop" else "drop"
    return out


def released(value: ast.expr, how: str | None) -> bool:
    """Whether a release of kind ``how`` frees what ``ctx.a = value`` stored."""
    return how == "drop" or how == "pop" and isinstance(value, ast.List) and len(value.elts) == 1


def _top_releases(backward, ctx: str | None):
    """(attribute, how, node) for each release at the top level of backward's body; how is
    ``"del"`` (``del ctx.a``, ``delattr``), ``"none"``, ``"clear"`` or ``"pop"``."""
    for stmt in backward.node.body:
        yield from _releases(stmt, ctx)


def _releases(stmt: ast.stmt, ctx: str | None):
    if isinstance(stmt, ast.Delete):
        for target in stmt.targets:
            for t in target.elts if isinstance(target, ast.Tuple) else [target]:
                if isinstance(t, ast.Attribute) and attr_of(t, ctx, t.attr):
                    yield t.attr, "del", stmt
        return
    if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant) \
            and stmt.value.value is None:
        for t in stmt.targets:
            if isinstance(t, ast.Attribute) and attr_of(t, ctx, t.attr):
                yield t.attr, "none", stmt
    if isinstance(stmt, (ast.If, ast.For, ast.While, ast.Try, ast.With, ast.FunctionDef)):
        return
    for node in ast.walk(stmt):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id == "delattr" and len(node.args) == 2 \
                and isinstance(node.args[0], ast.Name) and node.args[0].id == ctx \
                and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
            yield node.args[1].value, "del", node
        elif isinstance(func, ast.Attribute) and func.attr in ("pop", "clear") \
                and isinstance(func.value, ast.Attribute) and attr_of(func.value, ctx, func.value.attr):
            yield func.value.attr, func.attr, node


@checker(GS235)
def check_consumed_state(facts: Facts, report) -> None:
    """GS235: backward deletes or pops what forward kept on ctx, unguarded."""
    backward = facts.method("backward")
    if backward is None or "backward" not in facts.fc.own:
        return
    ctx = facts.ctx_of(backward)
    kept = set()
    for method in own(facts, *CTX_METHODS):
        mctx = facts.ctx_of(method)
        kept |= {n.attr for n in ast.walk(method.node) if isinstance(n, ast.Attribute)
                 and isinstance(n.ctx, ast.Store) and attr_of(n, mctx, n.attr)}
    stored = {n.attr for n in ast.walk(backward.node) if isinstance(n, ast.Attribute)
              and isinstance(n.ctx, ast.Store) and attr_of(n, ctx, n.attr)}
    seen = set()
    for attr, how, node in _branch_releases(backward.node.body, ctx):
        if how not in ("del", "pop") or attr not in kept or attr in stored or attr in seen \
                or _guarded(backward.node, ctx, attr):
            continue
        seen.add(attr)
        error = "AttributeError" if how == "del" else "IndexError" if not getattr(
            node, "args", None) else "KeyError or IndexError"
        what = backward.source.segment(node) or f"ctx.{attr}"
        report("GS235", backward.source, node, f"`{short(what, 40)}` ({error})")


def _branch_releases(body: list[ast.stmt], ctx: str | None):
    """Releases at the top level of ``body`` and in its if/else and with blocks: a branch
    the first backward ran runs again on a second one, after its state is gone (CogDL's
    quantized linear deletes ``ctx.saved`` in both branches). Loops and try blocks are not
    entered (a try may be the guard)."""
    for stmt in body:
        yield from _releases(stmt, ctx)
        if isinstance(stmt, ast.If):
            yield from _branch_releases(stmt.body + stmt.orelse, ctx)
        elif isinstance(stmt, ast.With):
            yield from _branch_releases(stmt.body, ctx)


def _guarded(body: ast.AST, ctx: str | None, attr: str) -> bool:
    """Whether backward checks ``attr`` before consuming it and raises on its own
    (``if not hasattr(ctx, "a"): raise RuntimeError("... more than once")``, an assert on
    it): a deliberate, clear error for a second backward."""
    for node in ast.walk(body):
        test = node.test if isinstance(node, (ast.If, ast.Assert)) else None
        if test is None or not _mentions(test, ctx, attr):
            continue
        if isinstance(node, ast.Assert) or any(isinstance(n, ast.Raise) for n in ast.walk(node)):
            return True
    return False


def _mentions(test: ast.expr, ctx: str | None, attr: str) -> bool:
    for n in ast.walk(test):
        if attr_of(n, ctx, attr):
            return True
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) \
                and n.func.id in ("hasattr", "getattr") and len(n.args) >= 2 \
                and isinstance(n.args[0], ast.Name) and n.args[0].id == ctx \
                and isinstance(n.args[1], ast.Constant) and n.args[1].value == attr:
            return True
    return False
