"""GS120: a gradient whose shape cannot match its input (full reductions)."""

from __future__ import annotations

import ast

from gradsmith.linter._facts import Facts
from gradsmith.linter._flow import Flow
from gradsmith.linter._registry import Rule, checker
from gradsmith.linter._symbols import dotted

_H = "import torch\n\n\nclass Total(torch.autograd.Function):\n    @staticmethod\n"
GS120 = Rule(
    "GS120", "reduced-gradient-shape", "error",
    "backward returns the scalar incoming gradient for an input that forward reduced to a "
    "scalar",
    "forward returned a full reduction (sum/mean) of the input, so grad_output is a 0-dim "
    "tensor; autograd rejects it ('returned an invalid gradient ... expected shape').",
    "expand it back: `grad_output.expand(ctx.shape)` (divide by the element count for mean).",
    bad=_H + "    def forward(ctx, x):\n        return x.sum()\n\n    @staticmethod\n"
    "    def backward(ctx, grad_output):\n        return grad_output  # GS120\n",
    good=_H + "    def forward(ctx, x):\n        ctx.shape = x.shape\n        return x.sum()\n\n"
    "    @staticmethod\n    def backward(ctx, grad_output):\n        return grad_output.expand(ctx.shape)\n",
    brief="scalar gradient for an input reduced to a scalar",
)
_REDUCTIONS = {"sum", "mean", "norm", "prod", "amax", "amin", "logsumexp", "nansum", "nanmean"}


def _reduced_input(expr: ast.expr, inputs: list[str], resolve) -> str | None:
    """Input name if ``expr`` is a full (no-dim) reduction of it."""
    if not isinstance(expr, ast.Call) or expr.keywords or not isinstance(expr.func, ast.Attribute):
        return None
    if expr.func.attr not in _REDUCTIONS:
        return None
    parts = dotted(expr.func)
    if parts and resolve(parts):  # torch.sum(x)
        target = expr.args[0] if len(expr.args) == 1 else None
    else:
        target = expr.func.value if not expr.args else None
    if isinstance(target, ast.Name) and target.id in inputs:
        return target.id
    return None


def _only_grad(expr: ast.expr, grads: set[str]) -> bool:
    """Built only from incoming gradients, numbers and arithmetic (so still 0-dim)."""
    seen_grad = False
    for node in ast.walk(expr):
        if isinstance(node, ast.Name):
            if node.id not in grads:
                return False
            seen_grad = True
        elif isinstance(node, (ast.Call, ast.Subscript, ast.Attribute, ast.Starred,
                               ast.Compare, ast.IfExp, ast.Lambda)):
            return False
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            return False
    return seen_grad


@checker(GS120)
def check_reduced_shape(facts: Facts, report) -> None:
    fwd, bwd = facts.method("forward"), facts.method("backward")
    if fwd is None or bwd is None or facts.inputs is None or not (
        {"forward", "backward"} & facts.fc.own
    ):
        return
    params = facts.inputs[0]
    resolve = facts.resolver(fwd)
    reduced: set[str] = set()
    results = []
    bound: dict[str, ast.expr] = {}
    for stmt in ast.walk(fwd.node):
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(
            stmt.targets[0], ast.Name
        ):
            bound[stmt.targets[0].id] = stmt.value
        if isinstance(stmt, ast.Return):
            results.append(stmt.value)
    if len(results) != 1 or results[0] is None:
        return
    value = results[0]
    if isinstance(value, ast.Name) and value.id in bound:
        value = bound[value.id]
    name = _reduced_input(value, params, resolve)
    if name is None:
        return
    reduced.add(name)
    index = params.index(name)
    grads = set(bwd.params[1:])

    def visit(stmt, flow: Flow):
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(
            stmt.targets[0], ast.Name
        ):
            if _only_grad(stmt.value, grads):
                grads.add(stmt.targets[0].id)
            else:
                grads.discard(stmt.targets[0].id)
        if not isinstance(stmt, ast.Return) or stmt.value is None:
            return
        elts = stmt.value.elts if isinstance(stmt.value, ast.Tuple) else [stmt.value]
        if index < len(elts) and _only_grad(elts[index], grads):
            report("GS120", bwd.source, elts[index], f"input `{name}` was reduced to a scalar")

    facts.walk(bwd, visit)
