"""GS122: an output whose gradient backward never reads (a loss on it gets none)."""

from __future__ import annotations

import ast

from gradsmith.linter._evidence import index_like
from gradsmith.linter._facts import Facts, is_ctx_call
from gradsmith.linter._flow import walk_shallow
from gradsmith.linter._registry import Rule, checker
from gradsmith.linter._tensors import TUPLE_RESULT
from gradsmith.linter.rules._common import own, short, trivial
from gradsmith.linter.rules._fallthrough import _items
from gradsmith.linter.rules._unread_star import (
    ignored_positions,
    returned_items,
    used_as_integers,
)

_H = "import torch\n\n\nclass Fn(torch.autograd.Function):\n    @staticmethod\n"
GS122 = Rule(
    "GS122", "unread-output-gradient", "warning",
    "forward returns several tensors, but backward never reads the gradient of one of them",
    "A loss that uses that output gets no gradient through it: autograd calls backward with "
    "the output's gradient and backward drops it, so the inputs' gradients are silently "
    "wrong (the output looks differentiable: requires_grad is True).",
    "add that output's contribution to the gradients backward returns, or declare it "
    "`ctx.mark_non_differentiable(out)` (then using it in a loss has no gradient to lose), "
    "or `del` the parameter if no caller ever differentiates it. A leading `_` "
    "(`backward(ctx, g, _)`, `(g, _) = grad_outputs`) or a `*args` backward never reads "
    "does not change what the output is: it is reported at the output forward returns.",
    bad=_H + "    def forward(ctx, x):\n        return x * 2, x * x\n\n    @staticmethod\n"
    "    def backward(ctx, g, g_sq):  # GS122\n        return g * 2\n",
    good=_H + "    def forward(ctx, x):\n        ctx.save_for_backward(x)\n"
    "        return x * 2, x * x\n\n    @staticmethod\n    def backward(ctx, g, g_sq):\n"
    "        (x,) = ctx.saved_tensors\n        return g * 2 + g_sq * 2 * x\n",
    brief="output gradient never read: a loss on it gets no gradient",
)
#: Name parts of outputs that carry no gradient: flags, labels, ranks (integers or booleans)
#: and communication handles (not tensors at all).
_DISCRETE_PARTS = frozenset({"flag", "flags", "valid", "label", "labels", "argmax", "argmin",
                             "argsort", "rank", "ranks", "bins", "hits", "num", "handle",
                             "handles", "work", "event", "events", "stream", "future", "req",
                             "np", "numpy"})
#: Calls whose result is an integer or boolean tensor (no gradient flows through it).
_DISCRETE_CALLS = frozenset(
    """argmax argmin argsort nonzero long int bool short byte char searchsorted bucketize
    randint randperm count_nonzero isnan isinf isfinite eq ne lt le gt ge logical_and
    logical_or logical_not logical_xor unique sign floor ceil round trunc arange
    tril_indices triu_indices""".split()
)
_INT_WORDS = ("int", "long", "bool", "uint8", "short")


def _discrete(expr: ast.expr, defs: dict[str, list[ast.expr]], depth: int = 0) -> bool:
    """Whether forward's returned ``expr`` is visibly an integer/boolean tensor or a number."""
    if depth > 4:
        return False
    if isinstance(expr, ast.Constant) or isinstance(expr, ast.Compare):
        return True
    if isinstance(expr, ast.Name):
        if index_like(expr.id) or any(p in _DISCRETE_PARTS for p in expr.id.lower().split("_")):
            return True
        found = defs.get(expr.id, [])
        return bool(found) and all(_discrete(d, defs, depth + 1) for d in found)
    if isinstance(expr, ast.Call):
        name = expr.func.attr if isinstance(expr.func, ast.Attribute) else getattr(
            expr.func, "id", "")
        if name in _DISCRETE_CALLS or name in ("len", "int", "float", "bool", "item", "tolist") \
                or name.endswith("numpy"):  # numbers and arrays: autograd passes None
            return True
        for kw in expr.keywords:
            if kw.arg == "dtype" and any(w in ast.unparse(kw.value) for w in _INT_WORDS):
                return True
        if name in ("to", "type") and any(w in ast.unparse(a) for a in expr.args
                                           for w in _INT_WORDS):
            return True
    if isinstance(expr, ast.Attribute) and expr.attr in ("shape", "dtype", "device", "ndim"):
        return True
    return False


def _definitions(method) -> dict[str, list[ast.expr]]:
    """What each local name of ``method`` is bound to (``_`` marks a tuple item that is an
    index: ``vals, idx = x.max(-1)`` binds ``idx`` to a discrete value)."""
    defs: dict[str, list[ast.expr]] = {}
    for node in walk_shallow(method.node):
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            if isinstance(target, ast.Name):
                defs.setdefault(target.id, []).append(node.value)
            elif isinstance(target, ast.Tuple):
                call = node.value
                name = call.func.attr if isinstance(call, ast.Call) and isinstance(
                    call.func, ast.Attribute) else getattr(getattr(call, "func", None), "id", "")
                for i, elt in enumerate(target.elts):
                    if isinstance(elt, ast.Name):
                        tuple_index = name in TUPLE_RESULT and i == 1 and name not in (
                            "split", "chunk", "unbind", "tensor_split", "broadcast_tensors")
                        defs.setdefault(elt.id, []).append(
                            ast.Constant(0) if tuple_index else ast.Name("?", ast.Load()))
    return defs


def _non_differentiable(facts: Facts) -> set[str | int] | None:
    """What forward/setup_context marks non-differentiable: source texts, and positions
    of the output (setup_context's ``output[1]``, or a name unpacked from ``output``);
    None when it cannot be told (``*outs``)."""
    marked: set[str | int] = set()
    for method in own(facts, "forward", "setup_context"):
        ctx = facts.ctx_of(method) if method.name == "forward" else (
            method.params[0] if method.params else None)
        output = method.params[2] if method.name == "setup_context" and len(
            method.params) >= 3 else None
        positions = _output_positions(method, output) if output else {}
        for node in walk_shallow(method.node):
            if is_ctx_call(node, ctx, "mark_non_differentiable"):
                for arg in node.args:
                    if isinstance(arg, ast.Starred):
                        return None
                    marked.add(ast.unparse(arg))
                    if isinstance(arg, ast.Subscript) and isinstance(arg.value, ast.Name) \
                            and arg.value.id == output and isinstance(arg.slice, ast.Constant):
                        marked.add(arg.slice.value)
                    elif isinstance(arg, ast.Name) and arg.id in positions:
                        marked.add(positions[arg.id])
    return marked


def _output_positions(method, output: str) -> dict[str, int]:
    """Names bound to items of setup_context's ``output`` (``out, lse = output``)."""
    found: dict[str, int] = {}
    for node in walk_shallow(method.node):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) \
                and node.value.id == output:
            for target in node.targets:
                if isinstance(target, (ast.Tuple, ast.List)):
                    found.update({e.id: i for i, e in enumerate(target.elts)
                                  if isinstance(e, ast.Name)})
    return found


def _outputs(facts: Facts) -> list[list[ast.expr]] | None:
    """The items of each of forward's returns, when every return is a tuple of one length."""
    fwd = facts.method("forward")
    if fwd is None:
        return None
    rets = [_items(n.value) for n in walk_shallow(fwd.node) if isinstance(n, ast.Return)]
    if not rets or any(r is None for r in rets) or len({len(r) for r in rets}) != 1:
        return None
    return rets


@checker(GS122)
def check_unread_output_gradient(facts: Facts, report) -> None:
    for bwd in own(facts, "backward"):
        grads = bwd.params[1:]
        if bwd.vararg and not trivial(bwd.node.body):
            _check_star(facts, bwd, report)
            continue
        if len(grads) < 2 or trivial(bwd.node.body):
            continue
        outputs = _outputs(facts)
        if outputs is None or len(outputs[0]) != len(grads):
            continue
        marked = _non_differentiable(facts)
        if marked is None:
            continue
        # `del grad_x` is the usual way to say "unused on purpose" (as pylint reads it)
        read = _names_read(bwd.node)
        if read is None:
            continue
        defs = _definitions(facts.method("forward"))
        vals = facts.output_val.elements or ()
        discarded = False
        for index, name in enumerate(grads):
            if name in read or (
                    index < len(vals) and vals[index].tensor is False):
                continue
            items = [ret[index] for ret in outputs]
            if index in marked or any(ast.unparse(e) in marked or _discrete(e, defs)
                                      for e in items):
                continue
            label = short(ast.unparse(items[0]), 24)
            if name.startswith("_"):
                # `_`, `__`: dropped on purpose, but the float output forward returns there
                # still loses its gradient; one finding, at that output
                if not discarded and not any(used_as_integers(facts.method("forward"), e)
                                             for e in items):
                    discarded = True
                    report("GS122", facts.method("forward").source, items[0],
                           f"`{name}` drops output {index} (`{label}`)")
                continue
            arg = next(a for a in (*bwd.node.args.posonlyargs, *bwd.node.args.args)
                       if a.arg == name)
            report("GS122", bwd.source, arg, f"`{name}` (output {index}, `{label}`)")


def _names_read(node: ast.AST) -> set[str] | None:
    """The names a backward reads, or None when it reads them all (``locals()``, ``vars()``)."""
    read = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    return None if "locals" in read or "vars" in read else read


def _check_star(facts: Facts, bwd, report) -> None:
    """``backward(ctx, g, *rest)`` that never reads ``rest``, or unpacks it into ``_``,
    while forward may return a tensor there (an lse beside the output)."""
    forward = facts.method("forward")
    ignored = ignored_positions(bwd)
    if forward is None or not ignored:
        return
    marked = _non_differentiable(facts)
    if marked is None:
        return
    read = _names_read(bwd.node)
    if read is None:
        return
    defs = _definitions(forward)
    for index in sorted(ignored):
        items = [ret[index] for ret in returned_items(forward) if index < len(ret)]
        live = [e for e in items if not (ast.unparse(e) in marked or _discrete(e, defs)
                                         or used_as_integers(forward, e))]
        if not live or index in marked:
            continue
        label = short(ast.unparse(live[0]), 24)
        node = ignored[index]
        if node is None:  # `*args` never read: point at the output forward returns
            report("GS122", forward.source, live[0],
                   f"`*{bwd.node.args.vararg.arg}` drops output {index} (`{label}`)")
        else:
            report("GS122", bwd.source, node, f"`{node.id}` (output {index}, `{label}`)")
        return


__all__ = ["GS122"]
