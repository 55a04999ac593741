"""GS241: a checkpointing Function re-runs the function it was given in backward (with
arguments, and differentiates the result) without restoring the random state forward ran it
with."""

from __future__ import annotations

import ast

from gradsmith.linter._facts import Facts
from gradsmith.linter._registry import Rule, checker
from gradsmith.linter.rules._common import nodes, own, short

_H = ("import torch\n\n\nclass Checkpoint(torch.autograd.Function):\n    @staticmethod\n"
      "    def forward(ctx, run, x):\n")
_BWD = ("    @staticmethod\n    def backward(ctx, g):\n        (x,) = ctx.saved_tensors\n"
        "        x = x.detach().requires_grad_()\n        with torch.enable_grad():\n")
_TAIL = "        torch.autograd.backward(out, g)\n        return None, x.grad\n"
GS241 = Rule(
    "GS241", "recompute-without-rng-state", "warning",
    "backward re-runs the function forward was given (activation checkpointing) without "
    "restoring the random state forward ran it with",
    "Dropout (or any random operation) in the re-run draws new numbers: the gradient is "
    "computed for another mask than the one that made forward's output, so it is silently "
    "wrong for every random layer inside (torch.utils.checkpoint saves and restores the "
    "CPU and CUDA generator states for this reason, `preserve_rng_state=True`).",
    "save the state in forward (`ctx.cpu_state = torch.get_rng_state()`, also "
    "`torch.cuda.get_rng_state()` for CUDA tensors) and re-run under `with "
    "torch.random.fork_rng(): torch.set_rng_state(ctx.cpu_state); ...`; or use "
    "`torch.utils.checkpoint.checkpoint`.",
    bad=_H + "        ctx.run = run\n        ctx.save_for_backward(x)\n"
    "        with torch.no_grad():\n            return run(x)\n\n" + _BWD
    + "            out = ctx.run(x)  # GS241\n" + _TAIL,
    good=_H + "        ctx.run = run\n        ctx.state = torch.get_rng_state()\n"
    "        ctx.save_for_backward(x)\n        with torch.no_grad():\n            return run(x)\n\n"
    + _BWD + "            with torch.random.fork_rng():\n"
    "                torch.set_rng_state(ctx.state)\n                out = ctx.run(x)\n" + _TAIL,
    brief="recomputation draws new random numbers",
)
#: Names that show the random state is kept and restored (by hand or by torch's helpers).
_RNG = ("rng_state", "fork_rng", "get_state", "set_state", "manual_seed", "seed(")


@checker(GS241)
def check_recompute_rng(facts: Facts, report) -> None:
    fwd = next(own(facts, "forward"), None)
    if fwd is None:
        return
    params = set(fwd.params[1:]) | {a.arg for a in fwd.node.args.kwonlyargs}
    called = {n.func.id for n in nodes(fwd) if isinstance(n, ast.Call)
              and isinstance(n.func, ast.Name) and n.func.id in params}
    if not called:
        return
    kept = {}  # ctx attribute -> forward's parameter it holds
    for node in nodes(fwd):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) \
                and node.value.id in called:
            for target in node.targets:
                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                        and target.value.id == (fwd.params[0] if fwd.params else "ctx"):
                    kept[target.attr] = node.value.id
    if not kept:
        return
    text = facts.fc.source.segment(facts.fc.node) or ""
    if any(word in text for word in _RNG):
        return
    for bwd in own(facts, "backward"):
        differentiated = _differentiated(bwd)
        for node in nodes(bwd):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) \
                    and isinstance(node.value.func, ast.Attribute) \
                    and node.value.func.attr in kept \
                    and isinstance(node.value.func.value, ast.Name) and node.value.args \
                    and {n.id for t in node.targets for n in ast.walk(t)
                         if isinstance(n, ast.Name)} & differentiated:
                node = node.value
                attr = node.func.attr
                report("GS241", bwd.source, node,
                       f"`{short(ast.unparse(node.func))}(...)` re-runs forward's "
                       f"`{kept[attr]}` with a new random state")
                break


def _differentiated(bwd) -> set[str]:
    """Names backward differentiates (``torch.autograd.backward(out, g)``,
    ``torch.autograd.grad(out, ...)``, ``out.backward(g)``): a recomputation's result."""
    found: set[str] = set()
    for node in nodes(bwd):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("backward", "grad"):
            parts = [node.func.value, *node.args[:1]]
            found |= {n.id for p in parts for n in ast.walk(p) if isinstance(n, ast.Name)}
    return found - {"torch", "autograd"}


__all__ = ["GS241"]
