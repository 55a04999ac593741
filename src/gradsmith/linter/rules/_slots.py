"""GS218, GS219: what backward assumes forward kept, and which slot each gradient goes to."""

from __future__ import annotations

import ast
import re

from gradsmith.linter._facts import Facts, is_ctx_call
from gradsmith.linter._flow import walk_shallow
from gradsmith.linter._registry import Rule, checker
from gradsmith.linter.rules._common import attr_of, own

_H = "import torch\n\n\nclass Fn(torch.autograd.Function):\n    @staticmethod\n"
GS218 = Rule(
    "GS218", "conditional-save", "warning",
    "Tensors are saved only under a condition, but backward unpacks ctx.saved_tensors "
    "unconditionally",
    "When the condition was false in forward, ctx.saved_tensors is empty and the unpacking "
    "raises 'not enough values to unpack' in backward (harmless only if backward can never "
    "run then). `torch.is_grad_enabled()` asked inside forward is always False (autograd "
    "runs forward in no-grad mode), so a save under it never happens; a flag the caller "
    "computed before `apply` (`config.is_grad_enabled`) is what was meant.",
    "save on every path (or save `None` placeholders), or test the same condition in "
    "backward before unpacking.",
    bad=_H + "    def forward(ctx, x, w):\n        if ctx.needs_input_grad[1]:\n"
    "            ctx.save_for_backward(x)\n        return x * w\n\n    @staticmethod\n"
    "    def backward(ctx, g):\n        (x,) = ctx.saved_tensors  # GS218\n        return g, g * x\n",
    good=_H + "    def forward(ctx, x, w):\n        ctx.save_for_backward(x)\n        return x * w\n\n"
    "    @staticmethod\n    def backward(ctx, g):\n        (x,) = ctx.saved_tensors\n"
    "        return g, g * x\n",
    brief="saved only under a condition, unpacked unconditionally",
)
GS219 = Rule(
    "GS219", "gradient-slot", "warning",
    "backward returns a gradient in the slot of an input it is not the gradient of "
    "(named after another input, or for an input forward never reads)",
    "Autograd assigns gradients by position: a swapped slot gives each input the other's "
    "gradient (or fails on a shape mismatch), and a gradient for an input forward ignores "
    "is wrong (its true gradient is zero) or raises for a non-tensor input.",
    "return the gradients in the order of forward's inputs, and None for inputs forward "
    "does not use.",
    bad=_H + "    def forward(ctx, x, w):\n        ctx.save_for_backward(x, w)\n        return x * w\n\n"
    "    @staticmethod\n    def backward(ctx, g):\n        x, w = ctx.saved_tensors\n"
    "        grad_x, grad_w = g * w, g * x\n        return grad_w, grad_x  # GS219\n",
    good=_H + "    def forward(ctx, x, w):\n        ctx.save_for_backward(x, w)\n        return x * w\n\n"
    "    @staticmethod\n    def backward(ctx, g):\n        x, w = ctx.saved_tensors\n"
    "        grad_x, grad_w = g * w, g * x\n        return grad_x, grad_w\n",
    brief="gradient returned in another input's slot",
)


@checker(GS218)
def check_conditional_save(facts: Facts, report) -> None:
    backward = facts.method("backward")
    if backward is None or not facts.saves:
        return
    bctx = facts.ctx_of(backward)
    for stmt in backward.node.body:
        if isinstance(stmt, ast.If) and any(
            branch and isinstance(branch[-1], ast.Return) for branch in (stmt.body, stmt.orelse)
        ):
            return  # an early return: the unpacking may be reached only when saved
        if isinstance(stmt, ast.Assign) and attr_of(stmt.value, bctx, "saved_tensors"):
            unpack = stmt
            break
    else:
        return  # unpacked under a test of its own (or not at all)
    total = len(facts.inputs[0]) if facts.inputs else 0
    for method in own(facts, "forward", "setup_context"):
        ctx = facts.ctx_of(method) if method.name == "forward" else (
            method.params[0] if method.params else None)
        if ctx is None:
            continue
        guarded = _guarded_saves(method.node.body, ctx)
        if guarded is None:
            return  # some save on the main path
        for call, test in guarded:
            if not _true_when_backward_runs(test, ctx, total):
                # reported where it raises: the unpacking in backward
                report("GS218", backward.source, unpack, f"saved on line {call.lineno} only "
                       f"under `{ast.unparse(test)[:40]}`")
                return


def _guarded_saves(body: list[ast.stmt], ctx: str) -> list[tuple[ast.Call, ast.expr]] | None:
    """Saves nested under an ``if`` with no save on the other branch; None if one is
    unconditional (directly in ``body``, or on both branches)."""
    out = []
    for stmt in body:
        if isinstance(stmt, ast.If):
            here = [n for s in stmt.body for n in walk_shallow(s) if is_ctx_call(n, ctx, "save_for_backward")]
            there = [n for s in stmt.orelse for n in walk_shallow(s) if is_ctx_call(n, ctx, "save_for_backward")]
            if here and there:
                return None
            out += [(c, stmt.test) for c in here]
            if there:
                out += [(c, ast.UnaryOp(ast.Not(), stmt.test)) for c in there]
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        elif any(is_ctx_call(n, ctx, "save_for_backward") for n in walk_shallow(stmt)):
            return None  # in a loop, with, try: treat as unconditional
    return out


_GRAD_ON = re.compile(r"requires_grad|is_grad_enabled|needs_input_grad|training|grad_enabled")


def _true_when_backward_runs(test: ast.expr, ctx: str, total: int) -> bool:
    """Conditions that hold whenever autograd can call backward: some input needs a
    gradient, grad mode is on, or a single input requires grad; ``a and b`` only when both
    do (``torch.is_grad_enabled() and self.training`` is false in eval mode with grad on)."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return all(_true_when_backward_runs(v, ctx, total) for v in test.values)
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute) and \
            test.func.attr == "is_grad_enabled":
        return False  # autograd runs forward in no-grad mode: `torch.is_grad_enabled()` is False
    if isinstance(test, ast.Call) and getattr(test.func, "id", None) == "any":
        return True  # any(ctx.needs_input_grad), any(t.requires_grad for t in ...)
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        return all(_GRAD_ON.search(ast.unparse(v)) for v in test.values) and (
            total <= len(test.values))
    text = ast.unparse(test)
    if "is_grad_enabled" in text or "grad_enabled" in text:
        return True
    return total <= 1 and bool(_GRAD_ON.search(text))


_PREFIX = re.compile(r"^(?:grad_?|d_?|g_)(?P<name>\w+?)(?:_grad)?$|^(?P<name2>\w+?)_grad$")


@checker(GS219)
def check_gradient_slots(facts: Facts, report) -> None:
    backward, forward = facts.method("backward"), facts.method("forward")
    if backward is None or forward is None or facts.inputs is None or facts.inputs[2]:
        return
    if "backward" not in facts.fc.own:
        return
    params = facts.inputs[0]
    if len(params) < 2:
        return
    unread = _unread_inputs(facts, params)
    for node in walk_shallow(backward.node):
        if not (isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple)):
            continue
        elts = node.value.elts
        if len(elts) != len(params) or any(isinstance(e, ast.Starred) for e in elts):
            continue
        for slot, elt in enumerate(elts):
            if params[slot] in unread and not (isinstance(elt, ast.Constant) and elt.value is None):
                report("GS219", backward.source, elt,
                       f"a gradient for `{params[slot]}`, which forward never reads")
                return
            if not isinstance(elt, ast.Name):
                continue
            named = _grad_of(elt.id, params)
            if named is not None and named != params[slot] and _grad_of(
                elt.id, [params[slot]]
            ) is None:
                report("GS219", backward.source, elt,
                       f"`{elt.id}` in the slot of `{params[slot]}`, not `{named}`")
                return


def _unread_inputs(facts: Facts, params: list[str]) -> set[str]:
    """Inputs that forward (and setup_context) never mention at all (a ``del x`` is a
    mention: inputs deleted on purpose carry gradients to a kernel's parameters)."""
    used: set[str] = set()
    for name in ("forward", "setup_context"):
        method = facts.method(name)
        if method is None:
            continue
        if method.node.args.vararg or method.node.args.kwarg:
            return set()
        for node in ast.walk(method.node):
            if isinstance(node, ast.Name):
                used.add(node.id)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in (
                "locals", "vars", "eval", "exec"
            ):
                return set()
    if facts.fc.setup_style:
        return set()  # setup_context unpacks `inputs`; names may differ from forward's
    return {p for p in params if p not in used}


def _grad_of(name: str, params: list[str]) -> str | None:
    """The input ``name`` reads as the gradient of: ``grad_w``, ``dw``, ``w_grad`` -> ``w``."""
    match = _PREFIX.match(name)
    if not match:
        return None
    base = match.group("name") or match.group("name2")
    hits = [p for p in params if p == base or p.lstrip("_") == base]
    return hits[0] if len(hits) == 1 else None


__all__ = ["GS218", "GS219"]
