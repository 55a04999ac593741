"""GS233: forward marks a tensor dirty that it does not return."""

from __future__ import annotations

import ast

from gradsmith.linter._facts import Facts, is_ctx_call
from gradsmith.linter._registry import Rule, checker
from gradsmith.linter._reuse import reachable_after
from gradsmith.linter.rules._common import own
from gradsmith.linter.rules._fallthrough import _items

_H = "import torch\n\n\nclass Track(torch.autograd.Function):\n    @staticmethod\n"
_BWD = "    @staticmethod\n    def backward(ctx, g):\n        return g, None\n"
GS233 = Rule(
    "GS233", "mark-dirty-not-returned", "error",
    "forward passes a tensor to ctx.mark_dirty() and then returns without it",
    "autograd requires every tensor marked dirty to be an output: `apply` raises "
    "'Some elements marked as dirty during the forward method were not returned as output' "
    "each time forward takes that path (BatchNorm-style running statistics updated in place "
    "and marked dirty, but only `y` returned).",
    "return the marked tensor too (and mark it non-differentiable if it carries no "
    "gradient), or do not mark it: a buffer no gradient flows through (running statistics) "
    "needs no mark_dirty.",
    bad=_H + "    def forward(ctx, x, running_mean):\n        running_mean.mul_(0.9).add_(0.1 * x.mean())\n"
    "        ctx.mark_dirty(running_mean)  # GS233\n        return x * 2\n\n" + _BWD,
    good=_H + "    def forward(ctx, x, running_mean):\n        running_mean.mul_(0.9).add_(0.1 * x.mean())\n"
    "        return x * 2\n\n" + _BWD,
    brief="tensor marked dirty but not returned: apply raises",
)


@checker(GS233)
def check_dirty_returned(facts: Facts, report) -> None:
    for method in own(facts, "forward"):
        ctx = facts.ctx_of(method)
        body = method.node
        aliased = {n.value.id for n in ast.walk(body) if isinstance(n, (ast.Assign, ast.NamedExpr))
                   and isinstance(n.value, ast.Name)}
        for node in ast.walk(body):
            if not is_ctx_call(node, ctx, "mark_dirty"):
                continue
            names = [a.id for a in node.args if isinstance(a, ast.Name)]
            if len(names) != len(node.args) or set(names) & aliased:
                continue  # `*dirty`, expressions, or a name bound to another: not sure
            after = reachable_after(body, node)
            returns = [n for stmt in after or () for n in ast.walk(stmt)
                       if isinstance(n, ast.Return)]
            if after is None or not returns:
                continue
            for name in names:
                if _rebound(after, name):
                    break
                if not any(_returns(ret, name, body) for ret in returns):
                    report("GS233", method.source, node, f"`{name}`")
                    return


def _returns(ret: ast.Return, name: str, forward: ast.AST) -> bool:
    """``ret`` may return ``name`` itself (an item, a value it cannot see into, or a name
    bound to a call that is handed the tensor: ``out = gelu(A, out0=A)`` may be ``A``)."""
    if ret.value is None:
        return False
    items = _items(ret.value)
    if items is None:
        items = [ret.value]
    for item in items:
        if isinstance(item, ast.Name) and item.id == name:
            return True
        if isinstance(item, ast.Name) and any(
                isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == item.id
                                                  for t in ast.walk(n.targets[0]))
                and (isinstance(n.value, ast.Call) and _mentions(n.value, name)
                     or name in _choices(n.value))
                for n in ast.walk(forward)):
            return True
        if not isinstance(item, (ast.Name, ast.Constant, ast.BinOp, ast.UnaryOp, ast.Call,
                                 ast.Attribute, ast.Subscript)):
            return True  # a conditional, a starred sequence: it may hold the tensor
        if isinstance(item, ast.Call) and not isinstance(item.func, ast.Attribute):
            return True  # a helper's result may be the tensor itself
        if isinstance(item, ast.Call) and item.func.attr.endswith("_") and any(
                isinstance(n, ast.Name) and n.id == name for n in ast.walk(item.func.value)):
            return True  # `return x.add_(1)`: an in-place method returns its tensor
    return False


def _choices(value: ast.expr) -> set[str]:
    """Names a conditional value may be (``x if inplace else torch.empty_like(x)``)."""
    if isinstance(value, ast.IfExp):
        return _choices(value.body) | _choices(value.orelse)
    if isinstance(value, ast.BoolOp):
        return set().union(*(_choices(v) for v in value.values))
    return {value.id} if isinstance(value, ast.Name) else set()


def _mentions(call: ast.Call, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(call))


def _rebound(stmts: list, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)
               for stmt in stmts for n in ast.walk(stmt))


__all__ = ["GS233"]
