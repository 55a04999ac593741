"""GS123: backward passes a constant where forward passed or used one of its inputs (a
recomputation without the caller's mask), so it differentiates another function."""

from __future__ import annotations

import ast
import re

from gradsmith.linter._facts import Facts
from gradsmith.linter._flow import walk_shallow
from gradsmith.linter._registry import Rule, checker
from gradsmith.linter._symbols import dotted
from gradsmith.linter.rules._common import own, short

GS123 = Rule(
    "GS123", "recompute-with-other-value", "warning",
    "backward passes a constant where forward passed or used one of its inputs (a "
    "recomputation, or a gradient helper's mask/causal/scale)",
    "forward calls the helper with the caller's value (a mask, a bias, a scale) but backward "
    "calls the same helper with None or a constant (or gives its gradient helper a constant "
    "`attn_mask=`, `is_causal=`, `scale=` where forward used the input): whenever a caller "
    "passes a value, backward differentiates another function and the gradients are "
    "silently wrong.",
    "pass the same value in backward (keep it on ctx, or save it with "
    "`ctx.save_for_backward`).",
    bad="import torch\n\n\ndef _probs(s, mask=None):\n"
    "    return (s if mask is None else s + mask).softmax(-1)\n\n\n"
    "class Softmax(torch.autograd.Function):\n    @staticmethod\n"
    "    def forward(ctx, s, mask):\n        ctx.save_for_backward(s)\n"
    "        return _probs(s, mask=mask)\n\n    @staticmethod\n    def backward(ctx, g):\n"
    "        (s,) = ctx.saved_tensors\n        p = _probs(s, mask=None)  # GS123\n"
    "        return p * (g - (g * p).sum(-1, keepdim=True)), None\n",
    good="import torch\n\n\ndef _probs(s, mask=None):\n"
    "    return (s if mask is None else s + mask).softmax(-1)\n\n\n"
    "class Softmax(torch.autograd.Function):\n    @staticmethod\n"
    "    def forward(ctx, s, mask):\n        ctx.save_for_backward(s, mask)\n"
    "        return _probs(s, mask=mask)\n\n    @staticmethod\n    def backward(ctx, g):\n"
    "        s, mask = ctx.saved_tensors\n        p = _probs(s, mask=mask)\n"
    "        return p * (g - (g * p).sum(-1, keepdim=True)), None\n",
    brief="backward passes a constant for an input",
)


_NOT_VALUES = frozenset({"out", "output", "inplace", "async_op", "group", "stream", "dtype",
                         "device", "return_softmax", "return_attn_probs", "name"})


#: Keywords that change what attention-like code computes: a backward helper given a
#: constant for one of them (where forward used the caller's value) computes another function.
_SHAPING = re.compile(r"mask|causal|window|softcap|alibi|dropout|scale", re.I)


@checker(GS123)
def check_recompute_with_other_value(facts: Facts, report) -> None:
    fwd, inputs = facts.method("forward"), facts.inputs
    if fwd is None or not inputs:
        return
    names = set(inputs[0])
    passed: dict[str, dict[str, str]] = {}  # callee text -> {keyword: forward input}
    for node in walk_shallow(fwd.node):
        if isinstance(node, ast.Call):
            for kw in node.keywords:
                if kw.arg and kw.arg not in _NOT_VALUES and isinstance(kw.value, ast.Name) \
                        and kw.value.id in names:
                    passed.setdefault(ast.unparse(node.func), {})[kw.arg] = kw.value.id
    shaping = {n for n in names if _SHAPING.search(n)}
    used = _computed_with(fwd, shaping) if shaping else set()
    if not passed and not used:
        return
    resolve = facts.resolver(fwd)
    for bwd in own(facts, "backward"):
        mentioned = {n.attr for n in ast.walk(bwd.node) if isinstance(n, ast.Attribute)} | {
            n.id for n in ast.walk(bwd.node) if isinstance(n, ast.Name)}
        from_grad = _from_grad(bwd)
        for node in walk_shallow(bwd.node):
            if not isinstance(node, ast.Call) or _torch_function(node.func, resolve):
                continue  # torch's own functions also compute gradients
            same = passed.get(ast.unparse(node.func), {})
            if same and any(isinstance(n, ast.Name) and n.id in from_grad
                            for a in (*node.args, *node.keywords) for n in ast.walk(a)):
                same = {}  # the helper computes a gradient here, not forward again
            for kw in node.keywords:
                if not isinstance(kw.value, ast.Constant) or kw.arg is None:
                    continue
                if kw.arg in same:
                    source, how = same[kw.arg], "passes"
                elif kw.arg in used:
                    source, how = kw.arg, "uses"
                else:
                    continue
                if {kw.arg, source} & mentioned:
                    continue  # backward reads the value some other way (`ctx.mask`)
                callee = short(ast.unparse(node.func), 20)
                value = short(ast.unparse(kw.value), 12)
                whose = "it" if source == kw.arg else f"`{short(source, 16)}`"
                report("GS123", bwd.source, kw.value,
                       f"`{callee}({kw.arg}={value})`, forward {how} {whose}")


def _computed_with(fwd, candidates: set[str]) -> set[str]:
    """Those of ``candidates`` forward computes with: read other than in an ``assert`` or an
    ``is None`` test (``assert dropout_p == 0.0`` changes nothing a gradient depends on)."""
    skip: set[int] = set()
    for node in walk_shallow(fwd.node):
        if isinstance(node, ast.Assert) or isinstance(node, ast.Compare) and any(
                isinstance(c, ast.Constant) and c.value is None for c in node.comparators):
            skip.update(id(n) for n in ast.walk(node))
    return {n.id for n in walk_shallow(fwd.node) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Load) and n.id in candidates and id(n) not in skip}


def _torch_function(func: ast.expr, resolve) -> bool:
    """``F.linear``, ``torch.matmul``: also used in backward to compute gradients (custom
    ``torch.ops`` namespaces are user kernels, a recomputation like any helper)."""
    parts = dotted(func)
    qual = resolve(parts) if parts else None
    return qual is not None and not qual.startswith("torch.ops.")


def _from_grad(bwd) -> set[str]:
    """Backward's gradient parameters and the locals computed from them."""
    names = set(bwd.params[1:])
    if bwd.node.args.vararg:
        names.add(bwd.node.args.vararg.arg)
    for stmt in sorted((n for n in walk_shallow(bwd.node) if isinstance(n, ast.Assign)),
                       key=lambda n: (n.lineno, n.col_offset)):
        if any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(stmt.value)):
            names.update(n.id for t in stmt.targets for n in ast.walk(t)
                         if isinstance(n, ast.Name))
    return names


__all__ = ["GS123"]
