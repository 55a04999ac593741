"""GS237: backward of a one-output Function never reads the output's gradient, or gives
an input a constant gradient (``torch.ones(1)``) that ignores it."""

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
    "backward of a one-output Function never reads the output's gradient (or reads it "
    "only in a comparison, a mask such as `g.eq(0)`), or gives an input a constant gradient",
    "The gradient backward returns is then the same whatever the caller does with the "
    "output: `loss = weight * f(x)`, a mean over a batch, or a GradScaler's scaled loss "
    "(AMP) all get the gradient of `f(x)` alone, silently off by that factor (right only "
    "when the output's gradient happens to be exactly 1, as for `f(x).backward()`). The "
    "same holds for one input's gradient built from constants alone (`grad_loss = "
    "torch.ones(1)` for an auxiliary loss added through an identity): a vector-Jacobian "
    "product is linear in the output's gradient, so a loss weight, a mean, gradient "
    "accumulation or a GradScaler scales the other gradients but not that one (a zero "
    "gradient is not reported).",
    "multiply by the output's gradient (`grad_out * ...`, or pass it as the kernel's scale "
    "instead of a constant 1.0); name the parameter `_` if ignoring it is really meant.",
    bad=_H + "    def backward(ctx, grad_out):  # GS237\n        (x,) = ctx.saved_tensors\n"
    "        d = 2 * (x[1:] - x[:-1])\n"
    "        return torch.cat([-d, d.new_zeros(1)]) + torch.cat([d.new_zeros(1), d])\n",
    good=_H + "    def backward(ctx, grad_out):\n        (x,) = ctx.saved_tensors\n"
    "        d = 2 * (x[1:] - x[:-1])\n"
    "        return grad_out * (torch.cat([-d, d.new_zeros(1)]) + torch.cat([d.new_zeros(1), d]))"
    "\n",
    brief="a gradient ignores the output's gradient",
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
        masked = read is not None and name in read and _mask_only(bwd.node, name)
        if read is not None and name in read and not name.startswith("_") and not masked:
            _constant_slots(facts, bwd, report)
        if read is None or name in read and not masked or name.startswith("_"):
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
        how = "only compared (a mask), its values never scale" if masked else "never read"
        report("GS237", bwd.source, arg,
               f"`{name}` (of `{short(ast.unparse(returned[0]), 16)}`) is {how}")


#: Methods that turn a tensor into a mask: its values no longer scale anything.
_MASKS = frozenset("eq ne gt ge lt le isnan isinf isfinite bool".split())


def _mask_only(node: ast.AST, name: str) -> bool:
    """Every read of ``name`` in ``node`` is a comparison (``g == 0``, ``g.eq(0)``,
    ``torch.isnan(g)``): the gradient then depends on where it is zero, not on its values."""
    parents = {id(c): p for p in ast.walk(node) for c in ast.iter_child_nodes(p)}
    loads = [n for n in ast.walk(node) if isinstance(n, ast.Name) and n.id == name
             and isinstance(n.ctx, ast.Load)]
    for load in loads:
        up = parents.get(id(load))
        if isinstance(up, ast.Compare):
            continue
        if isinstance(up, ast.Attribute) and up.attr in _MASKS and isinstance(
                parents.get(id(up)), ast.Call) and parents[id(up)].func is up:
            continue
        if isinstance(up, ast.Call) and load in up.args and isinstance(up.func, ast.Attribute) \
                and up.func.attr in _MASKS - {"bool"}:
            continue
        return False
    return bool(loads)


#: Constructors of a tensor whose values are fixed numbers (not zero: a zero gradient is
#: always a correct one for an input the output does not depend on).
_CONSTANT = frozenset({"ones", "ones_like", "new_ones", "full", "full_like", "new_full"})


def _constant_slots(facts: Facts, bwd, report) -> None:
    """Report an input's gradient that is built from constants alone while backward reads
    the output's gradient elsewhere: a vector-Jacobian product is linear in the output's gradient, so a
    fixed non-zero value is wrong whenever that gradient is not exactly one (a loss weight,
    a mean, gradient accumulation, a GradScaler's scale)."""
    inputs = facts.inputs
    if inputs is None or inputs[2]:
        return
    params = inputs[0]
    assigned: dict[str, list[ast.expr]] = {}
    for sub in walk_shallow(bwd.node):
        if isinstance(sub, ast.Assign):
            for target in sub.targets:
                for node in ast.walk(target):
                    if isinstance(node, ast.Name):
                        assigned.setdefault(node.id, []).append(
                            sub.value if target is node else target)
        elif isinstance(sub, (ast.AugAssign, ast.AnnAssign, ast.NamedExpr, ast.For)):
            for node in ast.walk(sub.target):
                if isinstance(node, ast.Name):
                    assigned.setdefault(node.id, []).append(sub.target)
    done: set[int] = set()
    for sub in walk_shallow(bwd.node):
        if not isinstance(sub, ast.Return) or not isinstance(sub.value, ast.Tuple) \
                or len(sub.value.elts) != len(params):
            continue
        for index, item in enumerate(sub.value.elts):
            values = assigned.get(item.id, []) if isinstance(item, ast.Name) else [item]
            made = [v for v in values if _constant(v)]
            if not made or any(not _constant(v) and not _none(v) for v in values) \
                    or id(made[0]) in done or params[index].startswith("_"):
                continue
            done.add(id(made[0]))
            what = ast.unparse(made[0].func)
            report("GS237", bwd.source, made[0],
                   f"input `{short(params[index], 16)}` gets constant `{short(what, 16)}(...)`")


def _none(expr: ast.expr) -> bool:
    return isinstance(expr, ast.Constant) and expr.value is None


def _constant(expr: ast.expr) -> bool:
    """``torch.ones(1)``, ``x.new_ones(n)``, ``torch.full_like(x, 2.0)``: a tensor of fixed
    non-zero numbers."""
    if not isinstance(expr, ast.Call):
        return False
    func = expr.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if name not in _CONSTANT:
        return False
    if name.startswith(("full", "new_full")):
        fill = expr.args[1] if len(expr.args) > 1 else next(
            (k.value for k in expr.keywords if k.arg == "fill_value"), None)
        return isinstance(fill, ast.Constant) and isinstance(fill.value, (int, float)) \
            and not isinstance(fill.value, bool) and fill.value != 0
    return True


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
