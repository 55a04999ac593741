"""GS127: a Function's forward, backward or another autograd method defined twice in its class
body, so the later definition silently replaces the earlier (corpus 11c dev: a chamfer-distance
Function whose backward was written as a second ``def forward``)."""

from __future__ import annotations

import ast

from gradsmith.linter._facts import Facts
from gradsmith.linter._registry import Rule, checker

#: The methods autograd calls by name: a second definition decides what it runs.
_AUTOGRAD = frozenset({"forward", "backward", "setup_context", "vjp", "jvp", "vmap"})
_H = "import torch\n\n\nclass Fn(torch.autograd.Function):\n    @staticmethod\n"
GS127 = Rule(
    "GS127", "method-redefined", "error",
    "An autograd method (forward, backward, setup_context, ...) is defined twice in the class",
    "Python keeps only the last definition in a class body: the earlier one never runs. A "
    "backward written as a second `def forward` replaces the real forward (which then fails "
    "on every call, typically unpacking the empty `ctx.saved_tensors`) and leaves the "
    "Function without a backward. Not reported for definitions under `if`/`try` (one per "
    "branch) or decorated with `overload` or a property's `.setter`.",
    "rename the later definition to the method it was meant to be (usually `backward`), or "
    "delete the one that is dead.",
    bad=_H + "    def forward(ctx, x):\n        ctx.save_for_backward(x)\n        return x * x\n\n"
    "    @staticmethod\n    def forward(ctx, g):  # GS127\n        (x,) = ctx.saved_tensors\n"
    "        return 2 * x * g\n",
    good=_H + "    def forward(ctx, x):\n        ctx.save_for_backward(x)\n        return x * x\n\n"
    "    @staticmethod\n    def backward(ctx, g):\n        (x,) = ctx.saved_tensors\n"
    "        return 2 * x * g\n",
    brief="autograd method defined twice",
)


@checker(GS127)
def check_method_redefined(facts: Facts, report) -> None:
    seen: dict[str, int] = {}
    for stmt in facts.fc.node.body:  # direct statements only: `if`/`try` branches are choices
        if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                or stmt.name not in _AUTOGRAD or _alternative(stmt):
            continue
        if stmt.name in seen:
            report("GS127", facts.fc.source, stmt,
                   f"`{stmt.name}` defined again (first at line {seen[stmt.name]}); "
                   "the earlier one never runs")
        seen.setdefault(stmt.name, stmt.lineno)


def _alternative(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """``@overload`` (typing) or ``@name.setter``/``.deleter``: a same-named definition by
    design."""
    for dec in fn.decorator_list:
        name = dec.attr if isinstance(dec, ast.Attribute) else getattr(dec, "id", "")
        if name in ("overload", "setter", "deleter"):
            return True
    return False
