"""GS242: forward pads an input to a block size and returns the padded width."""

from __future__ import annotations

import ast

from gradsmith.linter._facts import Facts
from gradsmith.linter._registry import Rule, checker
from gradsmith.linter._symbols import dotted
from gradsmith.linter.rules._common import own, short

_H = "import torch\nimport torch.nn.functional as F\n\n\nclass Attn(torch.autograd.Function):\n" \
     "    @staticmethod\n    def forward(ctx, q):\n        og = q.size(-1)\n" \
     "        if og % 8 != 0:\n"
_B = "\n    @staticmethod\n    def backward(ctx, g):\n        og = g.size(-1)\n" \
     "        g = F.pad(g, [0, (8 - og % 8) % 8])\n        return (g * 2)[..., :og]\n"
GS242 = Rule(
    "GS242", "padded-output", "warning",
    "forward pads an input to a block size and never cuts its output back",
    "`og = q.size(-1)`, then `q = F.pad(q, [0, 8 - og % 8])` when `og % 8` (a kernel that "
    "needs a multiple of 8): whatever forward computes from the padded input has the padded "
    "width too. Unless forward cuts it back (`out[..., :og]`), the caller gets extra "
    "columns, and a backward that takes the width from the incoming gradient returns "
    "gradients of the padded width for the unpadded inputs, which autograd rejects "
    "('returned an invalid gradient'). Only sizes that need the padding fail: a warning.",
    "cut the output back to the size kept before padding: `out = out_padded[..., :og]`.",
    bad=_H + "            q = F.pad(q, [0, 8 - og % 8])  # GS242\n        return q * 2\n" + _B,
    good=_H + "            q = F.pad(q, [0, 8 - og % 8])\n        return (q * 2)[..., :og]\n" + _B,
    brief="forward returns the padded width",
)


@checker(GS242)
def check_padded_output(facts: Facts, report) -> None:
    for method in own(facts, "forward"):
        inputs = set(method.params)
        sizes = _sizes(method.node, inputs)
        if not sizes:
            continue
        pads, used = [], set()
        for node in ast.walk(method.node):
            if isinstance(node, ast.Assign) and _pads(node.value) and any(
                    isinstance(n, ast.Name) and n.id in sizes for n in ast.walk(node.value)):
                pads.append(node)
        if not pads:
            continue
        allowed = {id(n) for p in pads for n in ast.walk(p.value)}
        allowed |= {id(n) for s in ast.walk(method.node) if isinstance(s, (ast.If, ast.IfExp))
                    for n in ast.walk(s.test)}
        for node in ast.walk(method.node):
            if isinstance(node, ast.Name) and node.id in sizes and isinstance(
                    node.ctx, ast.Load) and id(node) not in allowed:
                used.add(node.id)  # sliced, kept on ctx, passed on: the width is handled
        for pad in pads:
            size = next(n.id for n in ast.walk(pad.value) if isinstance(n, ast.Name)
                        and n.id in sizes)
            if size not in used:
                target = ast.unparse(pad.targets[0])
                report("GS242", method.source, pad, f"`{short(target, 16)}` padded, "
                       f"`{short(size, 16)}` never used to cut the output back")
                break


def _sizes(func: ast.AST, inputs: set[str]) -> set[str]:
    """Names bound once to an input's size along one dimension (``x.size(2)``,
    ``x.shape[-1]``)."""
    found: dict[str, int] = {}
    for node in ast.walk(func):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found[target.id] = found.get(target.id, 0) + (
                        1 if _input_size(node.value, inputs) else 100)
    return {name for name, count in found.items() if count == 1}


def _input_size(expr: ast.expr, inputs: set[str]) -> bool:
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) \
            and expr.func.attr == "size" and len(expr.args) == 1:
        base = expr.func.value
    elif isinstance(expr, ast.Subscript) and isinstance(expr.value, ast.Attribute) \
            and expr.value.attr == "shape":
        base = expr.value.value
    else:
        return False
    return isinstance(base, ast.Name) and base.id in inputs


def _pads(expr: ast.expr) -> bool:
    """``F.pad(x, ...)`` / ``torch.nn.functional.pad(x, ...)`` of a name."""
    parts = dotted(expr.func) if isinstance(expr, ast.Call) else None
    return bool(parts) and parts[-1] == "pad" and len(parts) >= 2 and expr.args != [] \
        and isinstance(expr.args[0], ast.Name)


__all__ = ["GS242"]
