"""GS226: backward sets an input's gradient to None on the very branch where that input
needs one (``if filter.requires_grad: ...; grad_filter = None``)."""

from __future__ import annotations

import ast

from gradsmith.linter._facts import Facts
from gradsmith.linter._registry import Rule, checker
from gradsmith.linter.rules._common import own, short

_H = "import torch\n\n\nclass Conv(torch.autograd.Function):\n    @staticmethod\n"
_FWD = (
    "    def forward(ctx, x, w):\n        ctx.save_for_backward(x, w)\n        return x * w\n\n"
    "    @staticmethod\n    def backward(ctx, g):\n        x, w = ctx.saved_tensors\n"
)
GS226 = Rule(
    "GS226", "none-when-needed", "warning",
    "backward returns None for an input's gradient on the branch where that input needs one",
    "The branch runs only when the input requires a gradient (`if w.requires_grad:`, "
    "`if ctx.needs_input_grad[1]:`), and there the gradient is None: the input silently gets "
    "no gradient (`.grad` stays None, it is never trained) while its Function looks "
    "differentiable; a print or a TODO in the branch does not stop training.",
    "compute the gradient there, or raise (`NotImplementedError`) so that the caller knows; "
    "mark the input as non-differentiable by passing it detached if no gradient is meant.",
    bad=_H + _FWD + "        grad_w = None\n        if w.requires_grad:\n"
    "            print('weight gradient is not implemented')\n"
    "            grad_w = None  # GS226\n        return g * w, grad_w\n",
    good=_H + _FWD + "        grad_w = None\n        if w.requires_grad:\n"
    "            grad_w = g * x\n        return g * w, grad_w\n",
    brief="gradient is None on the branch where its input needs one",
)


@checker(GS226)
def check_none_when_needed(facts: Facts, report) -> None:
    inputs = facts.inputs
    if inputs is None:
        return
    params = inputs[0]
    for method in own(facts, "backward"):
        ctx = facts.ctx_of(method)
        found = [n for n in ast.walk(method.node) if isinstance(n, (ast.If, ast.Return))]
        slots = [r.value.elts for r in found if isinstance(r, ast.Return)
                 and isinstance(r.value, ast.Tuple) and len(r.value.elts) == len(params)]
        if not slots:
            continue
        for node in found:
            if not isinstance(node, ast.If):
                continue
            needed = _needs(node.test, ctx, params)
            if needed is None:
                continue
            index, when_true = needed
            branch = node.body if when_true else node.orelse
            if any(isinstance(s, ast.Raise) for b in branch for s in ast.walk(b)):
                continue  # it fails loudly
            for stmt in _nones(branch):
                name = stmt.targets[0].id
                if any(isinstance(e[index], ast.Name) and e[index].id == name for e in slots):
                    report("GS226", method.source, stmt,
                           f"`{short(name, 24)}` when `{short(params[index], 24)}` needs one")


def _nones(branch: list[ast.stmt]) -> list[ast.Assign]:
    """``name = None`` statements of a branch whose name it binds to nothing else."""
    found, other = [], set()
    for stmt in branch:
        for sub in ast.walk(stmt):
            if isinstance(sub, ast.Assign) and len(sub.targets) == 1 \
                    and isinstance(sub.targets[0], ast.Name):
                if isinstance(sub.value, ast.Constant) and sub.value.value is None:
                    found.append(sub)
                else:
                    other.add(sub.targets[0].id)
            elif isinstance(sub, (ast.AugAssign, ast.AnnAssign)) and isinstance(
                    sub.target, ast.Name):
                other.add(sub.target.id)
    return [s for s in found if s.targets[0].id not in other]


def _needs(test: ast.expr, ctx: str | None, params: list[str]) -> tuple[int, bool] | None:
    """(input index, whether the test is True exactly when that input needs a gradient)."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _needs(test.operand, ctx, params)
        return None if inner is None else (inner[0], not inner[1])
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(
            test.comparators[0], ast.Constant) and isinstance(test.comparators[0].value, bool):
        inner = _needs(test.left, ctx, params)
        if inner is None or not isinstance(test.ops[0], (ast.Is, ast.Eq, ast.IsNot, ast.NotEq)):
            return None
        same = isinstance(test.ops[0], (ast.Is, ast.Eq)) == test.comparators[0].value
        return inner[0], inner[1] == same
    if isinstance(test, ast.Attribute) and test.attr == "requires_grad" and isinstance(
            test.value, ast.Name) and test.value.id in params:
        return params.index(test.value.id), True
    if isinstance(test, ast.Subscript) and isinstance(test.value, ast.Attribute) \
            and test.value.attr == "needs_input_grad" and isinstance(test.value.value, ast.Name) \
            and test.value.value.id == ctx and isinstance(test.slice, ast.Constant) \
            and isinstance(test.slice.value, int) and 0 <= test.slice.value < len(params):
        return test.slice.value, True
    return None
