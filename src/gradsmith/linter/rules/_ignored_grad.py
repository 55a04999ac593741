"""GS237: backward of a one-output Function never reads the output's gradient."""

from __future__ import annotations

import ast

from gradsmith.linter._facts import Facts
from gradsmith.linter._flow import walk_shallow
from gradsmith.linter._registry import Rule, checker
from gradsmith.linter.rules._common import own, short, trivial
from gradsmith.linter.rules._unread import (
    _definitions,
    _discrete,
    _names_read,
    _non_differentiable,
)

_H = "import torch\n\n\nclass TV(torch.autograd.Function):\n    @staticmethod\n" \
     "    def forward(ctx, x):\n        ctx.save_for_backward(x)\n" \
     "        return (x[1:] - x[:-1]).pow(2).sum()\n\n    @staticmethod\n"
GS237 = Rule(
    "GS237", "grad-output-ignored", "warning",
    "backward of a one-output Function never reads the output's gradient",
    "The gradient backward returns is then the same whatever the caller does with the "
    "output: `loss = weight * f(x)`, a mean over a batch, or a GradScaler's scaled loss "
    "(AMP) all get the gradient of `f(x)` alone, silently off by that factor (right only "
    "when the output's gradient happens to be exactly 1, as for `f(x).backward()`).",
    "multiply by the output's gradient (`grad_out * ...`, or pass it as the kernel's scale "
    "instead of a constant 1.0); name the parameter `_` if ignoring it is really meant.",
    bad=_H + "    def backward(ctx, grad_out):  # GS237\n        (x,) = ctx.saved_tensors\n"
    "        d = 2 * (x[1:] - x[:-1])\n"
    "        return torch.cat([-d, d.new_zeros(1)]) + torch.cat([d.new_zeros(1), d])\n",
    good=_H + "    def backward(ctx, grad_out):\n        (x,) = ctx.saved_tensors\n"
    "        d = 2 * (x[1:] - x[:-1])\n"
    "        return grad_out * (torch.cat([-d, d.new_zeros(1)]) + torch.cat([d.new_zeros(1), d]))"
    "\n",
    brief="grad_output never read: the gradient ignores what the loss does with the output",
)


@checker(GS237)
def check_ignored_grad_output(facts: Facts, report) -> None:
    forward = facts.method("forward")
    for bwd in own(facts, "backward"):
        grads = bwd.params[1:]
        if forward is None or len(grads) != 1 or bwd.vararg or trivial(bwd.node.body):
            continue
        name = grads[0]
        read = _names_read(bwd.node)
        if read is None or name in read or name.startswith("_"):
            continue
        returned = [n.value for n in walk_shallow(forward.node) if isinstance(n, ast.Return)]
        if not returned or any(v is None or isinstance(v, (ast.Tuple, ast.List))
                               for v in returned):
            continue
        marked = _non_differentiable(facts)
        defs = _definitions(forward)
        if marked is None or any(ast.unparse(v) in marked or _discrete(v, defs)
                                 for v in returned):
            continue
        if not _returns_gradient(bwd.node, facts.ctx_of(bwd)):
            continue
        arg = next(a for a in (*bwd.node.args.posonlyargs, *bwd.node.args.args)
                   if a.arg == name)
        report("GS237", bwd.source, arg,
               f"`{name}` (the gradient of `{short(ast.unparse(returned[0]), 24)}`)")


def _returns_gradient(node: ast.AST, ctx: str | None) -> bool:
    """Some ``return`` of backward gives a gradient it computes: not None, and not one
    handed in through ctx (``return ctx.injected_grad``, ``ctx.portal.use_grad()``: a
    Function that replaces the incoming gradient on purpose, as pipeline schedules do)."""
    handed: dict[str, bool] = {}
    for sub in walk_shallow(node):
        if isinstance(sub, ast.Assign) and len(sub.targets) == 1 \
                and isinstance(sub.targets[0], ast.Name):
            name = sub.targets[0].id
            handed[name] = handed.get(name, True) and _from_ctx(sub.value, ctx)
    for sub in walk_shallow(node):
        if isinstance(sub, ast.Return) and sub.value is not None:
            items = sub.value.elts if isinstance(sub.value, ast.Tuple) else [sub.value]
            for item in items:
                if isinstance(item, ast.Constant) and item.value is None or _from_ctx(
                        item, ctx) or isinstance(item, ast.Name) and handed.get(item.id):
                    continue
                return True
    return False


def _from_ctx(expr: ast.expr, ctx: str | None) -> bool:
    """``ctx.a``, ``ctx.a.b`` or a call of a method reached through ctx."""
    if isinstance(expr, ast.Call):
        expr = expr.func
    while isinstance(expr, ast.Attribute):
        expr = expr.value
    return ctx is not None and isinstance(expr, ast.Name) and expr.id == ctx


__all__ = ["GS237"]
