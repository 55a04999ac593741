"""GS119, GS304: how backward reads what forward saved (unpack counts, tensors never read)."""

from __future__ import annotations

import ast

from gradsmith.linter._facts import Facts
from gradsmith.linter._flow import walk_shallow
from gradsmith.linter._registry import Rule, checker
from gradsmith.linter.rules._common import CTX_METHODS, attr_of, nodes, short

_H = "import torch\n\n\nclass Fn(torch.autograd.Function):\n    @staticmethod\n"
_B = "\n    @staticmethod\n    def backward(ctx, g):\n"
GS119 = Rule(
    "GS119", "saved-tensors-unpack", "error",
    "backward unpacks ctx.saved_tensors into a different number of names than forward saved",
    "Unpacking raises ValueError (or indexing IndexError) the first time backward runs.",
    "unpack exactly the tensors passed to save_for_backward, in the same order.",
    bad=_H + "    def forward(ctx, x, w):\n        ctx.save_for_backward(x, w)\n        return x * w\n"
    + _B + "        (x,) = ctx.saved_tensors  # GS119\n        return g, g * x\n",
    good=_H + "    def forward(ctx, x, w):\n        ctx.save_for_backward(x, w)\n        return x * w\n"
    + _B + "        x, w = ctx.saved_tensors\n        return g * w, g * x\n",
    brief="saved_tensors unpacked into the wrong count",
)
GS304 = Rule(
    "GS304", "saved-never-used", "info",
    "A tensor is saved for backward but backward never reads it",
    "It stays in memory until backward runs, for nothing: backward never reads "
    "ctx.saved_tensors, or unpacks a saved tensor into a name it never uses "
    "(`_, alpha = ctx.saved_tensors`).",
    "drop it from save_for_backward (or use what you saved).",
    bad=_H + "    def forward(ctx, x):\n        ctx.save_for_backward(x)  # GS304\n"
    "        return x * 3\n" + _B + "        return g * 3\n",
    good=_H + "    def forward(ctx, x):\n        return x * 3\n" + _B + "        return g * 3\n",
    brief="saved tensors never read",
)


@checker(GS119, GS304)
def check_saved_reads(facts: Facts, report) -> None:
    saves = facts.saves
    backward = facts.method("backward")
    if backward is None or not saves:
        return
    counts = {len(c.args) for c in saves if not any(isinstance(a, ast.Starred) for a in c.args)}
    exact = len(counts) == 1 and all(
        not any(isinstance(a, ast.Starred) for a in c.args) for c in saves
    )
    ctx = facts.ctx_of(backward)
    src = backward.source
    reads = [n for n in nodes(backward) if attr_of(n, ctx, "saved_tensors", "saved_variables")]
    own_pair = bool(set(facts.fc.own) & {"backward", "forward", "setup_context", "vjp"})
    if not reads:
        helpers = any(
            isinstance(n, ast.Call) and any(isinstance(a, ast.Name) and a.id == ctx for a in
                                            [*n.args, *(k.value for k in n.keywords)])
            for n in nodes(backward)
        )
        others = [facts.fc.methods.get(m) for m in ("jvp", "vjp") if m != backward.name]
        if not helpers and all(m is None or not _reads_saved(m) for m in others) \
                and any(not (isinstance(a, ast.Constant) and a.value is None)
                        for c in saves for a in c.args) \
                and own_pair and "backward" in facts.fc.own:
            report("GS304", _src_of(facts, saves[0]), saves[0])
        return
    if not exact or not own_pair:
        return
    (n_saved,) = counts
    for node in nodes(backward):
        if isinstance(node, ast.Assign) and attr_of(node.value, ctx, "saved_tensors",
                                                    "saved_variables"):
            for target in node.targets:
                if isinstance(target, (ast.Tuple, ast.List)) and not any(
                    isinstance(e, ast.Starred) for e in target.elts
                ) and len(target.elts) != n_saved:
                    report("GS119", src, target,
                           f"{len(target.elts)} names, {n_saved} tensors saved")
        elif isinstance(node, ast.Subscript) and attr_of(node.value, ctx, "saved_tensors",
                                                         "saved_variables"):
            idx = node.slice
            if isinstance(idx, ast.Constant) and isinstance(idx.value, int) \
                    and not -n_saved <= idx.value < n_saved:
                report("GS119", src, node, f"index {idx.value}, {n_saved} tensors saved")
    if len(saves) == 1 and len(reads) == 1:
        _unpacked_unused(facts, backward, ctx, saves[0], report)


def _unpacked_unused(facts: Facts, backward, ctx: str, save: ast.Call, report) -> None:
    """GS304 for each saved tensor that backward's one unpacking binds to a name it never
    reads (``_`` included); names read anywhere in backward, nested functions too, count."""
    loaded = {n.id for n in ast.walk(backward.node)
              if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    stand_ins = {t.id for n in ast.walk(facts.fc.node) if isinstance(n, ast.Assign)
                 and _stand_in(n.value, set()) for t in n.targets if isinstance(t, ast.Name)}
    for node in nodes(backward):
        if not (isinstance(node, ast.Assign) and attr_of(node.value, ctx, "saved_tensors",
                                                          "saved_variables")):
            continue
        for target in node.targets:
            if not isinstance(target, (ast.Tuple, ast.List)) \
                    or len(target.elts) != len(save.args):
                continue
            for i, (name, arg) in enumerate(zip(target.elts, save.args)):
                if isinstance(name, ast.Name) and name.id not in loaded \
                        and not _stand_in(arg, stand_ins):
                    text = short(ast.unparse(arg))
                    into = "" if name.id == text else f", unpacked into `{name.id}`"
                    report("GS304", _src_of(facts, save), arg,
                           f"`{text}` (saved tensor {i}{into}) is never read in backward")


_CONSTRUCTORS = {"empty", "zeros", "ones", "tensor", "new_empty", "new_zeros", "new_ones",
                 "new_tensor"}


def _stand_in(arg: ast.expr, names: set[str]) -> bool:
    """``None``, a tensor built from literals (``torch.empty([0])``, a placeholder keeping a
    slot), or a name bound to one: saving it costs nothing worth reporting."""
    if isinstance(arg, ast.Constant) and arg.value is None:
        return True
    if isinstance(arg, ast.Name):
        return arg.id in names
    return isinstance(arg, ast.Call) and isinstance(arg.func, (ast.Attribute, ast.Name)) \
        and (arg.func.attr if isinstance(arg.func, ast.Attribute) else arg.func.id) \
        in _CONSTRUCTORS


def _reads_saved(method) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr in ("saved_tensors", "saved_variables")
               for n in walk_shallow(method.node))


def _src_of(facts: Facts, call):
    for name in CTX_METHODS:
        m = facts.method(name)
        if m is not None and any(n is call for n in walk_shallow(m.node)):
            return m.source
    return facts.fc.source
