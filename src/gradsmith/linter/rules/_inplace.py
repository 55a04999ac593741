"""GS101-GS103, GS115: in-place modification of inputs, grad_output and saved tensors."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from itertools import chain

from gradsmith.linter import _tensors as T
from gradsmith.linter._facts import Facts, is_ctx_call, statement_nodes
from gradsmith.linter._finding import Edit
from gradsmith.linter._flow import Flow, Val
from gradsmith.linter._helpers import COLLECTIVE, COLLECTIVES, HelperEdits, Helpers, is_collective
from gradsmith.linter._kernels import finder
from gradsmith.linter._passed import passed_helper
from gradsmith.linter._registry import Rule, checker
from gradsmith.linter._reuse import unread_after_calls
from gradsmith.linter.rules._common import nodes, own, short
from gradsmith.linter.rules._effect import filled_for_effect, returned_names
from gradsmith.linter.rules._inplace_scope import (
    OPTION,
    by_option,
    chosen_by_option,
    chosen_out,
    detaches_other,
    option,
    reshapes_fresh_view,
    track_fresh_views,
)
from gradsmith.linter.rules._inplace_warnings import GS217, GS220, GS223, GS227, GS230
from gradsmith.linter.rules._out_buffers import opaque_callee, option_buffers

_IMPORT = "import torch\n\n\n"
GS101 = Rule(
    "GS101", "inplace-input", "error",
    "In-place modification of a forward input that is not marked dirty",
    "Autograd does not know the input changed: tensors saved from it, the caller's view of "
    "it and other users of it see corrupted values and gradients are wrong or fail.",
    "compute out of place (`x = x.clamp(min=0)`, or `out = x.clone()` first) or call "
    "`ctx.mark_dirty(x)` and return `x`.",
    bad=_IMPORT + "class Relu(torch.autograd.Function):\n    @staticmethod\n"
    "    def forward(ctx, x):\n        x[x < 0] = 0  # GS101\n        return x\n\n"
    "    @staticmethod\n    def backward(ctx, g):\n        return g\n",
    good=_IMPORT + "class Relu(torch.autograd.Function):\n    @staticmethod\n"
    "    def forward(ctx, x):\n        out = x.clone()\n        out[out < 0] = 0\n"
    "        return out\n\n    @staticmethod\n    def backward(ctx, g):\n        return g\n",
    brief="input modified in place without ctx.mark_dirty",
)
GS102 = Rule(
    "GS102", "inplace-grad-output", "warning",
    "In-place modification of grad_output (or a view of it) in backward",
    "autograd hands backward a buffer it may share: `fn(x).sum().backward()` passes an "
    "expanded gradient and the write raises ('more than one element of the written-to tensor "
    "refers to a single memory location'); a gradient autograd passes to another branch too "
    "(the output added to another tensor that needs a gradient, `y + z`) or the caller passed "
    "(`y.backward(g)`) is silently changed for that branch or the caller. Where the output "
    "feeds one consumer that makes a fresh gradient (a matmul), nothing goes wrong: which "
    "it is depends on the callers, so this is a warning.",
    "write the result to a new tensor: `grad = grad_output * 2`, or `grad_output.clone()` "
    "before in-place edits.",
    bad=_IMPORT + "class Double(torch.autograd.Function):\n    @staticmethod\n"
    "    def forward(ctx, x):\n        return x * 2\n\n    @staticmethod\n"
    "    def backward(ctx, grad_output):\n        grad_output *= 2  # GS102\n"
    "        return grad_output\n",
    good=_IMPORT + "class Double(torch.autograd.Function):\n    @staticmethod\n"
    "    def forward(ctx, x):\n        return x * 2\n\n    @staticmethod\n"
    "    def backward(ctx, grad_output):\n        return grad_output * 2\n",
    autofix=True,
    brief="grad_output modified in place",
)
GS103 = Rule(
    "GS103", "inplace-saved", "error",
    "In-place modification of a saved tensor (or a view of it) in backward",
    "Saved tensors are the forward's inputs/outputs; modifying them corrupts the caller's "
    "tensors and fails version checks on double backward.",
    "compute out of place (`y = x * 2`) or clone before modifying.",
    bad=_IMPORT + "class Square(torch.autograd.Function):\n    @staticmethod\n"
    "    def forward(ctx, x):\n        ctx.save_for_backward(x)\n        return x * x\n\n"
    "    @staticmethod\n    def backward(ctx, g):\n        (x,) = ctx.saved_tensors\n"
    "        x.mul_(2)  # GS103\n        return g * x\n",
    good=_IMPORT + "class Square(torch.autograd.Function):\n    @staticmethod\n"
    "    def forward(ctx, x):\n        ctx.save_for_backward(x)\n        return x * x\n\n"
    "    @staticmethod\n    def backward(ctx, g):\n        (x,) = ctx.saved_tensors\n"
    "        return g * 2 * x\n",
    brief="saved tensor modified in place",
)
GS115 = Rule(
    "GS115", "mark-dirty-non-input", "error",
    "ctx.mark_dirty() called on a tensor that is not an input",
    "mark_dirty only declares in-place changes of inputs; PyTorch raises when a dirty tensor "
    "was not passed to forward.",
    "mark only the inputs you modified in place; fresh tensors need no marking.",
    bad=_IMPORT + "class AddOne(torch.autograd.Function):\n    @staticmethod\n"
    "    def forward(ctx, x):\n        out = x.clone()\n        out.add_(1)\n"
    "        ctx.mark_dirty(out)  # GS115\n        return out\n\n    @staticmethod\n"
    "    def backward(ctx, g):\n        return g\n",
    good=_IMPORT + "class AddOne(torch.autograd.Function):\n    @staticmethod\n"
    "    def forward(ctx, x):\n        x.add_(1)\n        ctx.mark_dirty(x)\n        return x\n\n"
    "    @staticmethod\n    def backward(ctx, g):\n        return g\n",
    brief="mark_dirty on a tensor that is not an input",
)

#: Modules of the in-place collectives (``_functional_collectives`` ones return new tensors).
_C10D = frozenset({"torch.distributed", "torch.distributed.distributed_c10d"})
#: Where ``out=`` is an output buffer (for other kernels it may name an input).
_OUT_MODULES = frozenset(T.TENSOR_MODULES | {"torch.linalg"})
_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
        ast.Mod: "%", ast.Pow: "**", ast.MatMult: "@", ast.BitAnd: "&", ast.BitOr: "|",
        ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>"}
_ATOMIC = (ast.Name, ast.Constant, ast.Attribute, ast.Call, ast.Subscript)
#: Running-statistics buffers: updating them in place in forward is the BatchNorm idiom.
_STATS = re.compile(r"^(running_\w+|num_batches_tracked|moving_\w+)$")


def _dirty_gradient(stmt, flow: Flow, method, report, on_grad: list) -> None:
    """``ctx.mark_dirty(grad_output)`` in backward: the author says an opaque call (an
    extension writing its argument) changed grad_output in place; in backward mark_dirty
    changes nothing, so the write stands (GS102)."""
    for node in statement_nodes(stmt):
        if is_ctx_call(node, flow.ctx, "mark_dirty"):
            for arg in node.args:
                if not isinstance(arg, ast.Starred) and "grad" in flow.eval(arg).origins:
                    on_grad.append(node)
                    label = short(method.source.segment(arg)) or "grad_output"
                    report("GS102", method.source, node,
                           f"`ctx.mark_dirty({label})` in backward: written in place before it")
                    return


def _unread_by_callers(facts: Facts, names: list[str]) -> bool:
    """Every call of the Function in the linted code passes, for each of ``names``, a value
    nothing reads after the call: no harm shown, GS230 instead of GS101."""
    inputs = facts.inputs
    if inputs is None or any(n not in inputs[0] for n in names):
        return False  # `*args`: which argument it is cannot be told
    positions = {inputs[0].index(n) for n in names}
    return unread_after_calls(facts.fc.node.name, positions, facts.sym_of)


def _vararg_positions(facts: Facts, method) -> dict[str, int]:
    """Names forward unpacks its ``*args`` into at its top level, by input position."""
    vararg = method.node.args.vararg
    if vararg is None:
        return {}
    first = len(method.params) - (0 if facts.fc.setup_style else 1)
    found: dict[str, int] = {}
    for stmt in method.node.body:
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Name) and \
                stmt.value.id == vararg.arg:
            for target in stmt.targets:
                if isinstance(target, (ast.Tuple, ast.List)) and all(
                        isinstance(e, ast.Name) for e in target.elts):
                    found.update((e.id, first + i) for i, e in enumerate(target.elts))
    return found


def _root(expr: ast.expr) -> ast.expr:
    while isinstance(expr, ast.Subscript):
        expr = expr.value
    return expr


def mutations(stmt: ast.stmt, flow: Flow, helpers: HelperEdits | None = None
              ) -> Iterator[tuple[ast.AST, ast.expr, str, bool]]:
    """In-place writes done by ``stmt``: (node, mutated expr, description, proves-tensor).

    ``helpers`` maps a call to the arguments a same-module helper edits in place.
    """
    for node in statement_nodes(stmt):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        parts = _dotted(func)
        qual = flow.torchish(parts) if parts and parts[0] not in flow.env else None
        if isinstance(func, ast.Attribute) and T.is_inplace_name(func.attr):
            if qual is None:
                yield node, func.value, f"`.{func.attr}()`", True
            elif node.args:
                yield node, node.args[0], f"`{'.'.join(parts)}()`", True
        elif qual and qual.rpartition(".")[0] in _C10D and parts[-1] in COLLECTIVES:
            tensor = node.args[0] if node.args else next(
                (k.value for k in node.keywords if k.arg in ("tensor", "output", "output_tensor")),
                None)
            if tensor is not None and not isinstance(tensor, ast.Starred):
                yield node, tensor, f"`{parts[-1]}()` {COLLECTIVE}", True
        opted = any(kw.arg == "inplace" and isinstance(kw.value, ast.Constant)
                    and kw.value.value is True for kw in node.keywords)
        edited = helpers(node) if helpers is not None and qual is None and not (
            isinstance(func, ast.Attribute) and T.is_inplace_name(func.attr)) else []
        for arg, what, proven in edited:  # a helper's body shows what it writes
            yield node, arg, OPTION if opted else what, proven
        for kw in node.keywords:
            chosen = chosen_out(kw)
            if chosen is not None:  # `out=x if inplace else None`: x is written by option
                yield node, chosen, "`out=` (`inplace` option)", True
            elif kw.arg == "out" and qual is not None and qual.rpartition(".")[0] in _OUT_MODULES:
                yield node, kw.value, "`out=`", True
            elif kw.arg == "inplace" and opted and node.args and not edited:
                yield node, node.args[0], OPTION, True
    if isinstance(stmt, ast.Assign):
        for target in stmt.targets:
            if isinstance(target, ast.Subscript):
                yield stmt, _root(target), "item assignment `[...] =`", False
    elif isinstance(stmt, ast.AugAssign):
        if isinstance(stmt.target, ast.Subscript):
            yield stmt, _root(stmt.target), "item assignment `[...] op=`", False
        elif isinstance(stmt.target, ast.Name):
            yield stmt, stmt.target, f"augmented assignment `{_OPS.get(type(stmt.op), '?')}=`", False


def _buffers(facts: Facts, method, kernels):
    """Out-buffers an ``inplace`` option points at another tensor, per statement."""
    resolve, sym = facts.resolver(method), facts.sym_of[id(method.source)]
    writes = option_buffers(method.node, method.source,
                            lambda call: opaque_callee(call, resolve, kernels, sym))
    return lambda stmt: ((node, arg, what, True) for node, arg, what in writes(stmt))


def _dotted(node):
    from gradsmith.linter._symbols import dotted

    return dotted(node)


def _augassign_fix(facts: Facts, method, stmt: ast.AugAssign) -> tuple[Edit, ...]:
    src = method.source
    op = _OPS.get(type(stmt.op))
    value = src.segment(stmt.value)
    if op is None or not value or "\n" in value:
        return ()
    if not isinstance(stmt.value, _ATOMIC):
        value = f"({value})"
    name = stmt.target.id
    return (Edit(src.start(stmt), src.end(stmt), f"{name} = {name} {op} {value}"),)


@checker(GS101, GS102, GS103, GS115, GS217, GS220, GS223, GS227, GS230)
def check_inplace(facts: Facts, report) -> None:
    dirty, dirty_unknown = facts.dirty
    buffers = facts.none_gradients  # state updated in place, never differentiated
    kernels = finder(facts.sym_of[id(facts.fc.source)], facts.sym_of)
    backward = facts.method("backward")
    helpers = Helpers(facts.fc.source, facts.fc.node, facts.resolver(facts.method("forward")
                      or backward), mutations, kernels, facts.sym_of,
                      passed_helper(facts, backward) if backward is not None else None).edits \
        if (facts.method("forward") or backward) else None
    for method in own(facts, "forward"):
        inputs = set(method.params[0 if facts.fc.setup_style else 1:])
        if method.node.args.vararg:
            inputs.add(method.node.args.vararg.arg)
        fresh: set[str] = set()
        chosen = chosen_by_option(method.node, method.source)
        # `a, state, b = args` in `forward(ctx, *args)`: state whose gradient is always None
        stateful = {n for n, i in _vararg_positions(facts, method).items()
                    if i in facts.none_slots}

        written: set[str] = set()
        out_bufs = _buffers(facts, method, kernels)

        def visit(stmt, flow: Flow, method=method, fresh=fresh, chosen=chosen, written=written,
                  stateful=stateful, inputs=inputs, out_bufs=out_bufs):
            for node, target, what, proven in chain(mutations(stmt, flow, helpers),
                                                    out_bufs(stmt)):
                if reshapes_fresh_view(node, target, fresh) or detaches_other(
                        node, target, what, method.node, inputs):
                    continue
                what = by_option(what, stmt, target, chosen)
                val: Val = flow.eval(target)
                names = sorted(o[6:] for o in val.origins if o.startswith("input:")
                               and not _STATS.match(o[6:]) and o[6:] not in buffers)
                if not names or dirty_unknown:
                    continue
                if not (proven or val.tensor):
                    continue
                if names == ["*"]:
                    if dirty or isinstance(target, ast.Name) and target.id in stateful:
                        continue
                elif all(n in dirty for n in names):
                    continue
                shown = ", ".join(n for n in names if n not in dirty)
                code = "GS217" if option(what) else "GS101"
                if code == "GS101":
                    if shown in written:
                        continue  # one root cause, one finding: the first write of each input
                    written.add(shown)
                    if _unread_by_callers(facts, [n for n in names if n not in dirty]):
                        code = "GS230"
                verb = "detaches" if "detach_" in what else "modifies"
                report(code, method.source, node, f"{what} {verb} input `{shown}`")
            for node in statement_nodes(stmt):
                if is_ctx_call(node, flow.ctx, "mark_dirty"):
                    for arg in node.args:
                        val = flow.eval(arg)
                        if val.tensor and not val.origins and not isinstance(arg, ast.Starred):
                            report("GS115", method.source, arg,
                                   f"`{short(method.source.segment(arg))}` is computed in forward")
            track_fresh_views(stmt, fresh)

        facts.walk(method, visit)
    for method in own(facts, "backward", "vjp"):
        opt_in = any(isinstance(n, ast.Name) and n.id == "inplace" or isinstance(
            n, ast.Attribute) and n.attr == "inplace" for n in nodes(method))

        fresh_b: set[str] = set()
        chosen_b = chosen_by_option(method.node, method.source)

        once_b: list[ast.AST] = []  # GS227 and GS103 are reported for the first write only
        once_103: list[ast.AST] = []
        on_grad: list[ast.AST] = []  # writes of grad_output reported
        out_bufs_b = _buffers(facts, method, kernels)

        def visit_b(stmt, flow: Flow, method=method, opt_in=opt_in, fresh=fresh_b, chosen=chosen_b,
                    once=once_b, once_103=once_103, on_grad=on_grad, out_bufs=out_bufs_b):
            for node, target, what, proven in chain(mutations(stmt, flow, helpers),
                                                    out_bufs(stmt)):
                what = by_option(what, stmt, target, chosen)
                val = flow.eval(target)
                if not proven and val.tensor is False:
                    continue  # `grads[i] = ...` rebinds a slot of a list, no tensor changes
                if reshapes_fresh_view(node, target, fresh):
                    continue
                label = short(method.source.segment(target)) or "tensor"
                if "grad" in val.origins:
                    fix = ()
                    if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name) \
                            and node is stmt and val.tensor:
                        fix = _augassign_fix(facts, method, stmt)
                    code = "GS217" if option(what) else "GS223" if is_collective(what) else "GS102"
                    on_grad.append(node)
                    report(code, method.source, node, f"{what} on `{label}`",
                           fix if code == "GS102" else ())
                elif "saved:fresh" in val.origins and what.startswith("kernel `"):
                    report("GS220", method.source, node, f"{what} on `{label}`")
                elif "saved:fresh" in val.origins and not opt_in and not option(what) and (
                        proven or val.tensor) and not once:
                    once.append(node)
                    report("GS227", method.source, node, f"{what} on `{label}`")
                elif "saved:state" in val.origins and not opt_in and not option(what):
                    # a state buffer (gradient always None) updated on purpose, as forward's
                    # statistics are (GS101): only a second backward through the graph raises
                    if not once:
                        once.append(node)
                        report("GS227", method.source, node, f"{what} on state `{label}`")
                elif "saved" in val.origins and (not opt_in or option(what)):
                    # an explicit in-place mode is silent unless this write is the one it picks
                    # (its first write: `softmax(x, out=grad)` then `grad.mul_(g)` is one)
                    if option(what) and not (opt_in and once_103):
                        if opt_in:
                            once_103.append(node)
                        report("GS217", method.source, node, f"{what} on `{label}`")
                    elif not once_103:  # one root cause (a view of it, `grad_2d`), one finding
                        once_103.append(node)
                        report("GS103", method.source, node, f"{what} on `{label}`")

            if not once and not opt_in:  # `kernel_inplace(g, saved)` then `return saved`
                for node, arg in filled_for_effect(stmt, flow, returned_names(method.node),
                                                   helpers)[:1]:
                    once.append(node)
                    report("GS227", method.source, node, f"`{short(ast.unparse(node.func))}()` "
                           f"fills `{arg.id}`, then returned as a gradient")
            if not on_grad:
                _dirty_gradient(stmt, flow, method, report, on_grad)
            track_fresh_views(stmt, fresh)

        facts.walk(method, visit_b)
