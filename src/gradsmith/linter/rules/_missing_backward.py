"""GS212: a Function that defines forward but no backward (autograd raises once a gradient
flows)."""

from __future__ import annotations

import ast

from gradsmith.linter._evidence import integer_tensor
from gradsmith.linter._facts import Facts
from gradsmith.linter._registry import Rule, checker
from gradsmith.linter.rules._common import nodes

_H = "import torch\n\n\nclass Fn(torch.autograd.Function):\n    @staticmethod\n"
_B = "\n    @staticmethod\n    def backward(ctx, g):\n"
GS212 = Rule(
    "GS212", "missing-backward", "warning",
    "The Function defines forward but no backward (or vjp)",
    "Autograd raises 'You must implement either the backward or vjp method' as soon as a "
    "gradient flows through it.",
    "implement backward, or mark the outputs non-differentiable "
    "(`ctx.mark_non_differentiable`) if no gradient is meant to flow.",
    bad="import torch\n\n\nclass Fn(torch.autograd.Function):  # GS212\n    @staticmethod\n"
    "    def forward(ctx, x):\n        return x * 2\n",
    good=_H.replace("class Fn", "class Fn") + "    def forward(ctx, x):\n        return x * 2\n"
    + _B + "        return g * 2\n",
    brief="forward without backward",
)


@checker(GS212)
def check_backward_exists(facts: Facts, report) -> None:
    fc = facts.fc
    if fc.unknown_base or "forward" not in fc.own or "backward" in fc.methods or "vjp" in fc.methods:
        return
    fwd = fc.methods["forward"]
    if fwd is None or any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                          and n.func.attr == "mark_non_differentiable" for n in nodes(fwd)):
        return
    for stmt in fc.node.body:
        if isinstance(stmt, ast.Assign) and any(  # `backward = staticmethod(...)`
            isinstance(t, ast.Name) and t.id in ("backward", "vjp") for t in stmt.targets
        ):
            return
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == "symbolic":
            return  # an ONNX export helper: forward only runs while exporting
    if not fc.setup_style and not _takes_ctx(fwd):
        return  # forward(a, b) without ctx: the class is a namespace, never applied
    if _returns_only_indices(fwd):
        return  # integer outputs never carry a gradient
    report("GS212", fc.source, fc.node, f"`{fc.name}`")


def _takes_ctx(method) -> bool:
    params = method.params
    if not params:
        return False
    first = params[0]
    if first in ("ctx", "context", "self"):
        return True
    return any(
        isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == first
        and (isinstance(n.ctx, ast.Store) or n.attr.startswith(("save_for", "mark_", "needs_")))
        for n in nodes(method)
    )


def _returns_only_indices(method) -> bool:
    values = []
    for node in nodes(method):
        if isinstance(node, ast.Return) and node.value is not None:
            values += node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
    return bool(values) and all(
        isinstance(v, ast.Name) and integer_tensor(method, v.id) for v in values)
