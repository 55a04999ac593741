"""GS126: a legacy Function whose plain forward reads state its ``__init__`` set."""

from __future__ import annotations

import ast

from gradsmith.linter._facts import Facts
from gradsmith.linter._flow import walk_shallow
from gradsmith.linter._registry import Rule, checker

_H = "import torch\n\n\nclass Scale(torch.autograd.Function):  # GS126\n"
GS126 = Rule(
    "GS126", "legacy-stateful-function", "error",
    "A legacy Function: `__init__` keeps state that a plain (non-static) `forward` reads "
    "from `self`",
    "Since torch 1.5 calling an instance (`Scale(2.0)(x)`) raises RuntimeError (legacy "
    "autograd function with non-static forward), and `Scale.apply(x)` hands ctx to `self`, "
    "which has none of that state (AttributeError): the Function cannot run at all.",
    "make forward and backward @staticmethods taking ctx, pass the configuration to "
    "`Fn.apply(x, k)` and keep it on ctx (`ctx.k = k`).",
    bad=_H + "    def __init__(self, k):\n        super().__init__()\n        self.k = k\n\n"
    "    def forward(self, x):\n        return x * self.k\n\n"
    "    def backward(self, g):\n        return g * self.k\n",
    good=_H.replace("  # GS126", "") + "    @staticmethod\n    def forward(ctx, x, k):\n"
    "        ctx.k = k\n        return x * k\n\n"
    "    @staticmethod\n    def backward(ctx, g):\n        return g * ctx.k, None\n",
    brief="legacy Function, cannot run: forward reads `__init__` state",
)


def legacy_state(fc) -> list[str]:
    """What a plain ``forward`` reads from ``self`` that the class's ``__init__`` set or
    its own methods provide (sorted), when forward is neither static nor a classmethod;
    empty otherwise. A ctx has none of these, so neither call path can run."""
    fwd = fc.methods.get("forward")
    if fwd is None or "forward" not in fc.own or fwd.static or fwd.classmethod:
        return []
    args = [a.arg for a in (*fwd.node.args.posonlyargs, *fwd.node.args.args)]
    inits = [s for s in fc.node.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"]
    if not args or not inits:
        return []
    me = [a.arg for a in (*inits[0].args.posonlyargs, *inits[0].args.args)][:1]
    provided = {n.attr for n in ast.walk(inits[0]) if isinstance(n, ast.Attribute)
                and isinstance(n.ctx, ast.Store) and isinstance(n.value, ast.Name)
                and n.value.id in me}
    provided |= {s.name for s in fc.node.body if isinstance(s, ast.FunctionDef)
                 and s.name not in ("__init__", "forward", "backward", "setup_context")}
    reads, stored = set(), set()
    for node in walk_shallow(fwd.node):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id == args[0]:
            (stored if isinstance(node.ctx, ast.Store) else reads).add(node.attr)
    return sorted((reads & provided) - stored)


@checker(GS126)
def check_legacy(facts: Facts, report) -> None:
    fc = facts.fc
    state = legacy_state(fc)
    if state:
        more = ", ..." if len(state) > 2 else ""
        shown = ", ".join(f"`self.{name}`" for name in state[:2])
        report("GS126", fc.source, fc.node, f"{shown}{more}")
