"""GS231: forward reseeds a global random generator (to get a seed for its own kernel)."""

from __future__ import annotations

import ast

from gradsmith.linter._facts import Facts
from gradsmith.linter._kernels import finder
from gradsmith.linter._registry import Rule, checker
from gradsmith.linter._symbols import dotted
from gradsmith.linter.rules._common import own, short
from gradsmith.linter.rules._kernels import _called_helper

_H = "import torch\n\n\nclass Dropout(torch.autograd.Function):\n    @staticmethod\n"
_BWD = "    @staticmethod\n    def backward(ctx, g):\n        return g * ctx.mask, None\n"
GS231 = Rule(
    "GS231", "forward-reseeds-rng", "warning",
    "forward (or a helper it calls) reseeds a global random generator (`torch.seed()`, "
    "`torch.random.seed()`, `torch.manual_seed(...)`, `random.seed`, `np.random.seed`)",
    "Reseeding replaces the state every later random draw of the process depends on: "
    "`torch.seed()` picks a new non-deterministic seed on every call, so a run that set "
    "`torch.manual_seed(0)` is no longer reproducible (dropout masks, data shuffling and "
    "initialisation after the first call all change from run to run), and a fixed "
    "`manual_seed(s)` makes every call draw the same numbers.",
    "draw the kernel's seed from the generator without resetting it: "
    "`seed = torch.randint(0, 2**31 - 1, (), device='cpu').item()` (or take a "
    "`torch.Generator` argument).",
    bad=_H + "    def forward(ctx, x, p):\n        seed = torch.seed()  # GS231\n"
    "        gen = torch.Generator().manual_seed(seed)\n"
    "        ctx.mask = (torch.rand(x.shape, generator=gen) > p) / (1 - p)\n"
    "        return x * ctx.mask\n\n" + _BWD,
    good=_H + "    def forward(ctx, x, p):\n"
    "        seed = int(torch.randint(0, 2**31 - 1, ()))\n"
    "        gen = torch.Generator().manual_seed(seed)\n"
    "        ctx.mask = (torch.rand(x.shape, generator=gen) > p) / (1 - p)\n"
    "        return x * ctx.mask\n\n" + _BWD,
    brief="forward reseeds the global random generator",
)

#: Functions that reset a process-wide generator (qualified by the module's imports).
_RESEED = frozenset({
    "torch.seed", "torch.manual_seed", "torch.random.seed", "torch.random.manual_seed",
    "torch.cuda.seed", "torch.cuda.seed_all", "torch.cuda.manual_seed",
    "torch.cuda.manual_seed_all", "torch.cuda.random.manual_seed", "random.seed",
    "numpy.random.seed",
})
_DEPTH = 2


@checker(GS231)
def check_reseeding(facts: Facts, report) -> None:
    sym = facts.sym_of[id(facts.fc.source)]
    for method in own(facts, "forward"):
        found = _reseed(method.node, sym, facts.sym_of, 0)
        if found is None:
            continue
        node, text, there = found
        klass = facts.fc.node
        if there is not sym or not klass.lineno <= node.lineno <= klass.end_lineno:
            node = found_in_forward = _first_call_to(method.node, sym, facts.sym_of)
            if found_in_forward is None:
                continue
        report("GS231", method.source, node, f"`{text}()`")


def _qualified(call: ast.Call, sym) -> str | None:
    parts = dotted(call.func)
    if not parts:
        return None
    head = sym.imports.get(parts[0], parts[0])
    return ".".join([head, *parts[1:]])


def _reseed(func: ast.AST, sym, sym_of: dict, depth: int):
    """(the reseeding call, its text, the module it is in) in ``func`` or the helpers it
    calls (the Function's own static helpers included), else None."""
    cached = func.__dict__.get("_gs_reseed")
    if cached is not None:
        return cached or None
    func.__dict__["_gs_reseed"] = ()  # recursion ends here
    calls = [n for n in ast.walk(func) if isinstance(n, ast.Call)]
    found = None
    for call in calls:
        qual = _qualified(call, sym)
        if qual in _RESEED:
            found = (call, short(".".join(dotted(call.func) or [])), sym)
            break
    if found is None and depth < _DEPTH:
        find = finder(sym, sym_of)
        for call in calls:
            helper = _called_helper(call, sym.source.functions, find)
            if helper is None:
                continue
            owner = find.owner(helper) or sym
            found = _reseed(helper, owner, sym_of, depth + 1)
            if found is not None:
                break
    func.__dict__["_gs_reseed"] = found or ()
    return found


def _first_call_to(forward: ast.AST, sym, sym_of: dict) -> ast.Call | None:
    """The call in forward that leads to the reseeding helper (reported in forward's file)."""
    find = finder(sym, sym_of)
    for call in (n for n in ast.walk(forward) if isinstance(n, ast.Call)):
        helper = _called_helper(call, sym.source.functions, find)
        if helper is not None and _reseed(helper, find.owner(helper) or sym, sym_of, 1):
            return call
    return None


__all__ = ["GS231"]
