"""GS234: an output kept on ctx that backward releases (the GS104 cycle, broken whenever
backward runs); where backward releases ctx state."""

from __future__ import annotations

import ast

from gradsmith.linter._facts import Facts
from gradsmith.linter._registry import Rule
from gradsmith.linter.rules._common import attr_of

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


def released_attrs(facts: Facts) -> dict[str, str]:
    """ctx attributes backward releases on every path: ``"drop"`` (``del ctx.a``,
    ``delattr(ctx, "a")``, ``ctx.a = None``, ``ctx.a.clear()``) or ``"pop"``
    (``ctx.a.pop()``, which releases a one-item list). Only statements at the top level of
    backward's body count (a release under a condition may not run)."""
    backward = facts.method("backward")
    if backward is None:
        return {}
    ctx = facts.ctx_of(backward)
    out: dict[str, str] = {}
    for stmt in backward.node.body:
        for attr, how in _releases(stmt, ctx):
            if out.get(attr) != "drop":
                out[attr] = how
    return out


def _releases(stmt: ast.stmt, ctx: str | None):
    if isinstance(stmt, ast.Delete):
        for target in stmt.targets:
            for t in target.elts if isinstance(target, ast.Tuple) else [target]:
                if isinstance(t, ast.Attribute) and attr_of(t, ctx, t.attr):
                    yield t.attr, "drop"
        return
    if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant) \
            and stmt.value.value is None:
        for t in stmt.targets:
            if isinstance(t, ast.Attribute) and attr_of(t, ctx, t.attr):
                yield t.attr, "drop"
    if isinstance(stmt, (ast.If, ast.For, ast.While, ast.Try, ast.With, ast.FunctionDef)):
        return
    for node in ast.walk(stmt):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id == "delattr" and len(node.args) == 2 \
                and isinstance(node.args[0], ast.Name) and node.args[0].id == ctx \
                and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
            yield node.args[1].value, "drop"
        elif isinstance(func, ast.Attribute) and func.attr in ("pop", "clear") \
                and isinstance(func.value, ast.Attribute) and attr_of(func.value, ctx, func.value.attr):
            yield func.value.attr, "pop" if func.attr == "pop" else "drop"


def released(value: ast.expr, how: str | None) -> bool:
    """Whether a release of kind ``how`` frees what ``ctx.a = value`` stored."""
    return how == "drop" or how == "pop" and isinstance(value, ast.List) and len(value.elts) == 1
