"""GS124: a gradient computed only when ``ctx.needs_input_grad`` of an input that is not a
tensor is set (its flag is always False): the gradient is never computed, whichever slot it
is returned in (the non-tensor's own slot means some tensor input's slot lost it)."""

from __future__ import annotations

import ast
import re

from gradsmith.linter._evidence import evidence
from gradsmith.linter._facts import Facts
from gradsmith.linter._flow import walk_shallow
from gradsmith.linter._registry import Rule, checker
from gradsmith.linter.rules._common import attr_of, own, short
from gradsmith.linter.rules._fallthrough import _items
from gradsmith.linter.rules._slots import _grad_of

_H = "import torch\n\n\nclass Scale(torch.autograd.Function):\n    @staticmethod\n" \
     "    def forward(ctx, x, w, eps=1e-6):\n        ctx.save_for_backward(x, w)\n" \
     "        return x * w + eps\n\n    @staticmethod\n    def backward(ctx, g):\n" \
     "        x, w = ctx.saved_tensors\n        gx = g * w if ctx.needs_input_grad[0] else None\n"
GS124 = Rule(
    "GS124", "needs-input-grad-other-input", "warning",
    "a gradient is computed only when ctx.needs_input_grad of an input that is not a "
    "tensor is set (it never is)",
    "needs_input_grad[j] is always False for an input that is not a tensor (a number, a "
    "flag), so the gradient guarded by it is never computed: the input it is returned for "
    "(or, when it sits in the non-tensor's own slot, the tensor input it belongs to) "
    "silently gets no gradient (its .grad stays None and it is never trained).",
    "guard each gradient with its own input's flag: `ctx.needs_input_grad[k]` for the k-th "
    "input of forward (ctx excluded).",
    bad=_H + "        gw = g * x if ctx.needs_input_grad[2] else None\n"
    "        return gx, gw, None  # GS124\n",
    good=_H + "        gw = g * x if ctx.needs_input_grad[1] else None\n        return gx, gw, None\n",
    brief="gradient gated by a non-tensor input's flag",
)


def _flag(test: ast.expr, ctx: str | None, flags: dict[str, int]) -> int | None:
    """The input index a test reads: ``ctx.needs_input_grad[j]`` or a name unpacked from it."""
    if isinstance(test, ast.Subscript) and attr_of(test.value, ctx, "needs_input_grad") \
            and isinstance(test.slice, ast.Constant) and type(test.slice.value) is int:
        return test.slice.value
    if isinstance(test, ast.Name):
        return flags.get(test.id)
    return None


def _none(expr: ast.expr | None) -> bool:
    return isinstance(expr, ast.Constant) and expr.value is None


def _guards(bwd, ctx: str | None) -> tuple[dict[str, int], dict[str, int]]:
    """Unpacked flags (``need_x, need_w = ctx.needs_input_grad``) and the locals assigned
    only under one flag (``gw = ... if ctx.needs_input_grad[1] else None`` or in an ``if``)."""
    flags: dict[str, int] = {}
    guard: dict[str, int] = {}
    other: set[str] = set()  # assigned a value some other way: not only under the flag
    stmts = sorted((n for n in walk_shallow(bwd.node) if isinstance(n, (ast.Assign, ast.If))),
                   key=lambda n: (n.lineno, n.col_offset))
    guarded: set[int] = set()
    for stmt in stmts:
        if isinstance(stmt, ast.If):
            index = _flag(stmt.test, ctx, flags)
            if index is None:
                continue
            for sub in stmt.body:
                if isinstance(sub, ast.Assign):
                    guarded.add(id(sub))
                    for target in sub.targets:
                        if isinstance(target, ast.Name):
                            guard[target.id] = index
            continue
        value = stmt.value
        if attr_of(value, ctx, "needs_input_grad"):
            for target in stmt.targets:
                if isinstance(target, (ast.Tuple, ast.List)):
                    flags.update({e.id: i for i, e in enumerate(target.elts)
                                  if isinstance(e, ast.Name)})
            continue
        if id(stmt) in guarded or _none(value):
            continue
        index = _flag(value.test, ctx, flags) if isinstance(value, ast.IfExp) and _none(
            value.orelse) else None
        for target in stmt.targets:
            for name in (n.id for n in ast.walk(target) if isinstance(n, ast.Name)):
                if index is None:
                    other.add(name)
                else:
                    guard[name] = index
    return flags, {k: v for k, v in guard.items() if k not in other}


_FLAG = re.compile(r"^(is|use|has|enable|with|do|return)_[a-z0-9_]+$")


def _not_tensor(name: str, ev: dict[str, bool | None]) -> bool:
    """Evidence says so, or a flag's name (``is_causal``) that no use contradicts."""
    return ev.get(name) is False or ev.get(name) is None and bool(_FLAG.match(name))


@checker(GS124)
def check_flag_of_another_input(facts: Facts, report) -> None:
    inputs, fwd = facts.inputs, facts.method("forward")
    if inputs is None or inputs[2] or fwd is None or len(inputs[0]) < 2:
        return
    params = inputs[0]
    ev = None
    for bwd in own(facts, "backward"):
        ctx = facts.ctx_of(bwd)
        if not any(attr_of(n, ctx, "needs_input_grad") for n in walk_shallow(bwd.node)):
            continue
        flags, guard = _guards(bwd, ctx)
        for ret in (n for n in walk_shallow(bwd.node) if isinstance(n, ast.Return)):
            for slot, item in enumerate(_items(ret.value) or []):
                if isinstance(item, ast.Name):
                    index = guard.get(item.id)
                elif isinstance(item, ast.IfExp) and _none(item.orelse):
                    index = _flag(item.test, ctx, flags)
                else:
                    index = None
                if index is None or index >= len(params) or slot >= len(params):
                    continue
                if index == slot and _grad_of(item.id if isinstance(item, ast.Name) else "",
                                              [params[slot]]):
                    continue  # `grad_eps` for `eps`: the author holds eps for a tensor
                if ev is None:
                    ev = evidence(fwd, params, facts.ctx_of(fwd), facts.resolver(fwd),
                                  passed=facts.passed_tensors)
                if _not_tensor(params[index], ev) and (
                        slot == index or ev.get(params[slot]) is not False):
                    whom = f"for `{short(params[slot], 12)}` " if slot != index else ""
                    report("GS124", bwd.source, item,
                           f"`{short(ast.unparse(item), 16)}` {whom}"
                           f"reads flag [{index}] of `{short(params[index], 12)}`")
                    return


__all__ = ["GS124"]
