"""GS232: backward returns a gradient cast to a fixed 16-bit dtype, whatever the input's."""

from __future__ import annotations

import ast

from gradsmith.linter._facts import Facts
from gradsmith.linter._flow import walk_shallow
from gradsmith.linter._kernels import finder
from gradsmith.linter._registry import Rule, checker
from gradsmith.linter._symbols import dotted
from gradsmith.linter.rules._common import own, short
from gradsmith.linter.rules._fallthrough import _items
from gradsmith.linter.rules._kernels import _called_helper

_H = "import torch\n\n\nclass Scale(torch.autograd.Function):\n    @staticmethod\n" \
     "    def forward(ctx, x):\n        return x * 3\n\n    @staticmethod\n"
GS232 = Rule(
    "GS232", "gradient-fixed-dtype", "warning",
    "backward returns a gradient cast to a fixed 16-bit dtype (`.to(torch.bfloat16)`, "
    "`.half()`), not to its input's dtype",
    "Autograd casts a gradient back to its input's dtype without a word, so for float32 (or "
    "float16 against bfloat16) inputs the gradient has silently lost its precision: "
    "bfloat16 keeps 8 bits of mantissa, a relative error near 0.4%, where the sibling "
    "gradients cast to `q.dtype` keep full precision.",
    "cast to the input's dtype (`dq.to(q.dtype)`), or return the gradient as computed.",
    bad=_H + "    def backward(ctx, g):\n        return (g * 3).to(torch.bfloat16)  # GS232\n",
    good=_H + "    def backward(ctx, g):\n        return (g * 3).to(g.dtype)\n",
    brief="gradient cast to a fixed 16-bit dtype: precision silently lost",
)

_LOW = frozenset({"bfloat16", "float16", "half"})


def _fixed_cast(expr: ast.expr) -> bool:
    """``t.to(torch.bfloat16)``, ``t.to(dtype=torch.half)``, ``t.half()``, ``t.bfloat16()``."""
    if not (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute)):
        return False
    name = expr.func.attr
    if name in ("half", "bfloat16") and not expr.args and not expr.keywords:
        return True
    if name not in ("to", "type"):
        return False
    dtypes = [*expr.args, *(k.value for k in expr.keywords if k.arg == "dtype")]
    return any((dotted(d) or [""])[:1] == ["torch"] and (dotted(d) or [""])[-1] in _LOW
               for d in dtypes)


@checker(GS232)
def check_gradient_dtype(facts: Facts, report) -> None:
    sym = facts.sym_of[id(facts.fc.source)]
    for bwd in own(facts, "backward"):
        bound: dict[str, list[tuple[ast.expr, int | None]]] = {}
        for node in walk_shallow(bwd.node):
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = node.targets[0]
                if isinstance(target, ast.Name):
                    bound.setdefault(target.id, []).append((node.value, None))
                elif isinstance(target, (ast.Tuple, ast.List)):
                    for i, elt in enumerate(target.elts):
                        if isinstance(elt, ast.Name):
                            bound.setdefault(elt.id, []).append((node.value, i))
        for ret in (n for n in walk_shallow(bwd.node) if isinstance(n, ast.Return)):
            for item in _items(ret.value) or [ret.value]:
                found = _cast_of(item, bound, sym, facts.sym_of, bwd.source)
                if found is not None:
                    source, node = found
                    report("GS232", source, node, f"`{short(source.segment(node))}`")
                    return


def _cast_of(item, bound, sym, sym_of, source):
    """(source, the cast) when the returned ``item`` is a fixed 16-bit cast: itself, a
    name bound to one, or the same position of what a helper of this file returns."""
    if item is None:
        return None
    if _fixed_cast(item):
        return source, item
    if not isinstance(item, ast.Name):
        return None
    for value, index in bound.get(item.id, ()):
        if index is None and _fixed_cast(value):
            return source, value
        if index is not None and isinstance(value, ast.Call):
            helper = _called_helper(value, sym.source.functions, finder(sym, sym_of))
            if helper is None or helper not in sym.source.tree.body:
                continue  # a helper of this file, whose return the finding can point at
            for ret in (n for n in walk_shallow(helper) if isinstance(n, ast.Return)):
                items = _items(ret.value)
                if items is not None and index < len(items) and _fixed_cast(items[index]):
                    return source, items[index]
    return None


__all__ = ["GS232"]
