"""GS108-GS110, GS116, GS118, GS209: counts that must agree between forward and backward."""

from __future__ import annotations

import ast

from gradsmith.linter._facts import Facts
from gradsmith.linter._flow import Flow
from gradsmith.linter._registry import Rule, checker
from gradsmith.linter.rules._common import attr_of, nodes, own, terminates, trivial
from gradsmith.linter.rules._direct import is_none
from gradsmith.linter.rules._fallthrough import idle_fallthrough, not_none_beyond, raising_calls
from gradsmith.linter.rules._latent import GS229, GS246, int_inputs, no_gradient_outputs
from gradsmith.linter.rules._listish import is_list
from gradsmith.linter.rules._unknown_dtype import GS248, count_if_floating

_H = "import torch\n\n\nclass Fn(torch.autograd.Function):\n    @staticmethod\n"
_B = "\n    @staticmethod\n    def backward(ctx, g):\n"
GS108 = Rule(
    "GS108", "backward-return-count", "error",
    "backward returns a different number of values than forward has inputs",
    "Autograd needs one gradient (or None) per forward input and raises "
    "'returned an incorrect number of gradients'. Only a tuple is unpacked: a list "
    "(`return [gx, gw]`, `grads = []` ... `return grads`) is one value, so two or more "
    "inputs raise that count error and one input raises 'expected Variable or None (got "
    "list)'; return `tuple(grads)` instead.",
    "return one value per forward input (ctx excluded), None for non-tensor or "
    "non-differentiable ones.",
    bad=_H + "    def forward(ctx, x, k):\n        ctx.k = k\n        return x * k\n" + _B
    + "        return g * ctx.k  # GS108\n",
    good=_H + "    def forward(ctx, x, k):\n        ctx.k = k\n        return x * k\n" + _B
    + "        return g * ctx.k, None\n",
    brief="wrong number of gradients returned",
)
GS209 = Rule(
    "GS209", "backward-return-optional", "warning",
    "backward returns fewer values than forward's inputs including those with defaults "
    "(or *args)",
    "Calls that pass the optional arguments make backward fail with "
    "'returned an incorrect number of gradients'.",
    "return a value (None) for every forward parameter, optional ones included.",
    bad=_H + "    def forward(ctx, x, scale=2.0):\n        ctx.scale = scale\n"
    "        return x * scale\n" + _B + "        return g * ctx.scale  # GS209\n",
    good=_H + "    def forward(ctx, x, scale=2.0):\n        ctx.scale = scale\n"
    "        return x * scale\n" + _B + "        return g * ctx.scale, None\n",
    brief="too few gradients when optional inputs are passed",
)
GS109 = Rule(
    "GS109", "backward-missing-return", "error",
    "backward does not return a value on every path",
    "Falling off the end returns None, which autograd reads as one missing gradient: "
    "gradients silently vanish or it raises a count error. A fall-through that runs only "
    "when no input backward differentiates needs a gradient (`if any(ctx.needs_input_grad)`, "
    "or `if grads is not None` where forward kept `grads = ... if acts.requires_grad else "
    "None` for the one input backward returns a gradient for) cannot run and is not reported. "
    "A backward that always raises on purpose, also through a linted helper that raises on "
    "every path for the literal arguments it is given (`log_and_assert(False, log, msg)` "
    "whose body asserts its condition, or a helper that only raises), is not reported.",
    "return the gradients (or explicit Nones) on every path.",
    bad=_H + "    def forward(ctx, x):\n        return x * 2\n\n    @staticmethod\n"
    "    def backward(ctx, g):  # GS109\n        if g is not None:\n            return g * 2\n",
    good=_H + "    def forward(ctx, x):\n        return x * 2\n" + _B
    + "        if g is not None:\n            return g * 2\n        return None\n",
    brief="backward can end without a return",
)
GS110 = Rule(
    "GS110", "backward-arity", "error",
    "backward takes a different number of gradient arguments than forward returns outputs",
    "Autograd calls backward with one gradient per forward output; a mismatch raises "
    "TypeError when backward runs.",
    "give backward one parameter per output (after ctx), e.g. `backward(ctx, g_out, g_idx)`.",
    bad=_H + "    def forward(ctx, x):\n        return x * 2, x * 3\n\n    @staticmethod\n"
    "    def backward(ctx, g):  # GS110\n        return g * 2\n",
    good=_H + "    def forward(ctx, x):\n        return x * 2, x * 3\n\n    @staticmethod\n"
    "    def backward(ctx, g2, g3):\n        return g2 * 2 + g3 * 3\n",
    brief="backward's gradient parameters do not match the outputs",
)
GS116 = Rule(
    "GS116", "needs-input-grad-index", "error",
    "ctx.needs_input_grad is indexed or unpacked beyond forward's inputs",
    "needs_input_grad has one flag per forward input; a wrong index raises IndexError or "
    "tests the wrong input.",
    "index it by the input's position in forward (ctx excluded).",
    bad=_H + "    def forward(ctx, x, w):\n        ctx.save_for_backward(x, w)\n        return x @ w\n"
    + _B + "        x, w = ctx.saved_tensors\n        gx = g @ w.t() if ctx.needs_input_grad[1] else None\n"
    "        gw = x.t() @ g if ctx.needs_input_grad[2] else None  # GS116\n        return gx, gw\n",
    good=_H + "    def forward(ctx, x, w):\n        ctx.save_for_backward(x, w)\n        return x @ w\n"
    + _B + "        x, w = ctx.saved_tensors\n        gx = g @ w.t() if ctx.needs_input_grad[0] else None\n"
    "        gw = x.t() @ g if ctx.needs_input_grad[1] else None\n        return gx, gw\n",
    brief="needs_input_grad index out of range",
)
GS118 = Rule(
    "GS118", "setup-context-signature", "error",
    "setup_context does not match forward: it must be `setup_context(ctx, inputs, output)` "
    "and unpack as many inputs as forward takes",
    "PyTorch calls it with exactly (ctx, inputs, output); a wrong signature or unpacking "
    "raises when the Function is applied.",
    "declare `setup_context(ctx, inputs, output)` and unpack `x, w = inputs` to match forward.",
    bad="import torch\n\n\nclass Fn(torch.autograd.Function):\n    @staticmethod\n"
    "    def forward(x, w):\n        return x * w\n\n    @staticmethod\n"
    "    def setup_context(ctx, inputs, output):\n        (x,) = inputs  # GS118\n"
    "        ctx.save_for_backward(x)\n" + _B + "        (x,) = ctx.saved_tensors\n"
    "        return None, g * x\n",
    good="import torch\n\n\nclass Fn(torch.autograd.Function):\n    @staticmethod\n"
    "    def forward(x, w):\n        return x * w\n\n    @staticmethod\n"
    "    def setup_context(ctx, inputs, output):\n        x, w = inputs\n"
    "        ctx.save_for_backward(x)\n" + _B + "        (x,) = ctx.saved_tensors\n"
    "        return None, g * x\n",
    brief="setup_context does not match forward",
)


def _returns(facts: Facts, method) -> list[tuple[ast.Return, int | None, ast.expr | None]]:
    out = []

    def visit(stmt, flow: Flow):
        if isinstance(stmt, ast.Return):
            count = 1 if stmt.value is None else flow.eval(stmt.value).count
            out.append((stmt, count, stmt.value))

    facts.walk(method, visit)
    return out


@checker(GS108, GS209, GS109, GS110, GS229, GS246, GS248)
def check_returns(facts: Facts, report) -> None:
    backward, forward = facts.method("backward"), facts.method("forward")
    if backward is None or forward is None or facts.inputs is None:
        return
    if not ({"forward", "backward", "setup_context", "vjp"} & facts.fc.own):
        return
    params, ndefault, vararg = facts.inputs
    total, required = len(params), len(params) - ndefault
    src = backward.source
    if trivial(backward.node.body) and any(isinstance(s, ast.Raise) for s in backward.node.body):
        return  # backward only raises (not differentiable on purpose): counts cannot matter
    returns = _returns(facts, backward)
    dead = _dead_returns(facts, backward)
    returns = [r for r in returns if id(r[0]) not in dead]
    raising = raising_calls(facts, backward) if not returns else None
    if raising is not None and terminates(backward.node.body, raising):
        return  # backward always raises through a helper (on purpose): counts cannot matter
    # no output can carry a gradient: backward never runs and a wrong count cannot fail yet
    count_code = _LatentCode(facts, forward)
    if "backward" in facts.fc.own or "vjp" in facts.fc.own:
        body = backward.node.body
        if not trivial(body) and not terminates(body) and not idle_fallthrough(
            facts, backward, forward, total
        ):
            if any(r[2] is not None for r in returns):
                report("GS109", src, backward.node, "some path ends without `return`")
            elif not returns:
                report("GS109", src, backward.node, "backward never returns a value")
    for ret, count, value in returns:
        if "backward" in facts.fc.own and is_list(value, backward.node):
            report(count_code(), src, ret, "a list is one value, not one per input "
                   "(autograd unpacks only a tuple)")
            continue
        if count is None:
            continue
        if count < required:
            report(count_code(), src, ret, f"returns {count}, forward takes {required}"
                   + (" or more" if vararg or ndefault else ""))
        elif vararg:
            calls = facts.apply_counts
            if calls and None not in calls and count not in calls and (
                count < min(calls) or not_none_beyond(value, max(calls))
            ):
                report(count_code(), src, ret, f"returns {count}, every call passes "
                       f"{' or '.join(map(str, sorted(calls)))}")
            elif count == len(params):
                report("GS209", src, ret, f"returns {count}, forward also takes `*"
                       f"{forward.node.args.vararg.arg}`: calls passing extra arguments fail")
            continue
        elif count < total and not any(c is not None and c >= total for _, c, _ in returns):
            # (another return giving every gradient means the short one serves short calls)
            report("GS209", src, ret, f"returns {count}, forward takes up to {total}")
        elif count > total and total > 0 and isinstance(value, ast.Tuple):
            extra = value.elts[total:]
            if not all(isinstance(e, ast.Constant) and e.value is None for e in extra):
                report(count_code(), src, ret, f"returns {count}, forward takes {total}")
    _check_arity(facts, report, forward, backward, count_code)


def _dead_returns(facts: Facts, backward) -> set[int]:
    """Returns under ``if grad is None:`` for one of backward's gradient parameters: autograd
    hands backward zeros, never None, unless the Function calls
    ``ctx.set_materialize_grads(False)``, so such a branch never runs and its count cannot fail."""
    grads = {a.arg for a in backward.node.args.args[1:]}
    dead: set[int] = set()
    for node in ast.walk(backward.node):
        if isinstance(node, ast.If) and _is_none_test(node.test, grads):
            dead.update(id(n) for stmt in node.body for n in ast.walk(stmt)
                        if isinstance(n, ast.Return))
    if not dead:  # the common case: no method needs unparsing
        return dead
    methods = [m for m in (facts.method(n) for n in ("forward", "setup_context", "backward"))
               if m is not None]
    if any("set_materialize_grads" in ast.unparse(m.node) for m in methods):
        return set()
    return dead


def _is_none_test(test: ast.expr, names: set[str]) -> bool:
    """``g is None`` (or several joined by ``or``) for gradient parameters ``g``."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        return all(_is_none_test(v, names) for v in test.values)
    return (isinstance(test, ast.Compare) and len(test.ops) == 1
            and isinstance(test.ops[0], ast.Is) and isinstance(test.left, ast.Name)
            and test.left.id in names and is_none(test.comparators[0]))


class _LatentCode:
    """GS229 when no output can carry a gradient, GS248 when that depends on an input's
    dtype the code does not show, else GS108; decided when first asked
    (the callers' evidence for integer inputs is looked up only for a wrong count)."""

    def __init__(self, facts: Facts, forward) -> None:
        self.facts, self.forward, self.code = facts, forward, None

    def __call__(self) -> str:
        if self.code is None:
            ctx = self.facts.ctx_of(self.forward)
            latent = no_gradient_outputs(self.forward, ctx) or no_gradient_outputs(
                self.forward, ctx, int_inputs(self.facts))
            self.code = "GS229" if latent else "GS248" if count_if_floating(
                self.facts, self.forward) else "GS108"
        return self.code


def _check_arity(facts: Facts, report, forward, backward, count_code) -> None:
    if backward.vararg or backward.name != "backward":
        return
    returns = _returns(facts, forward)
    counts = {c for _, c, _ in returns}
    grads = len(backward.params) - 1 - backward.ndefaults
    if len(counts) > 1 and None not in counts:
        misfit = [(r, c) for r, c, _ in returns if not grads <= c <= grads + backward.ndefaults]
        if misfit and len(misfit) < len(returns) and count_code() == "GS108":
            ret, outputs = misfit[0]
            took = f"{grads} to {grads + backward.ndefaults}" if backward.ndefaults else grads
            report("GS246", backward.source, backward.node,
                   f"takes {took} gradient(s), line {ret.lineno} returns {outputs}")
        return
    if len(counts) != 1 or None in counts:
        return
    (outputs,) = counts
    if outputs != grads and not (backward.ndefaults and grads <= outputs <= grads + backward.ndefaults):
        report("GS110" if count_code() == "GS108" else count_code(), backward.source, backward.node,
               f"backward takes {grads} gradient(s), forward returns {outputs} output(s)")


@checker(GS116, GS118)
def check_input_flags(facts: Facts, report) -> None:
    if facts.inputs is None:
        return
    params, ndefault, vararg = facts.inputs
    total, required = len(params), len(params) - ndefault
    if vararg:
        return
    for method in own(facts, "forward", "backward", "setup_context", "jvp", "vjp"):
        ctx = facts.ctx_of(method)
        for node in nodes(method):
            if isinstance(node, ast.Subscript) and attr_of(node.value, ctx, "needs_input_grad"):
                idx = node.slice
                if isinstance(idx, ast.Constant) and isinstance(idx.value, int) \
                        and not -total <= idx.value < total:
                    report("GS116", method.source, node,
                           f"index {idx.value}, forward has {total} input(s)")
            elif isinstance(node, ast.Assign):
                n = _unpack_count(node)
                if n is None:
                    continue
                if attr_of(node.value, ctx, "needs_input_grad") and not required <= n <= total:
                    report("GS116", method.source, node,
                           f"unpacked into {n}, forward has {total} input(s)")
                if method.name == "setup_context" and len(method.params) >= 2 and isinstance(
                    node.value, ast.Name
                ) and node.value.id == method.params[1] and not required <= n <= total:
                    report("GS118", method.source, node,
                           f"unpacks {n} inputs, forward takes {total}")
                if method.name == "setup_context" and len(method.params) >= 3 and isinstance(
                    node.value, ast.Name
                ) and node.value.id == method.params[2]:
                    outputs = facts.output_val.count
                    if outputs is not None and outputs != n:
                        report("GS118", method.source, node,
                               f"unpacks {n} outputs, forward returns {outputs}")
    for method in own(facts, "setup_context"):
        if len(method.params) != 3 and not method.vararg:
            report("GS118", method.source, method.node,
                   f"it takes {len(method.params)} parameter(s)")


def _unpack_count(node: ast.Assign) -> int | None:
    if len(node.targets) != 1:
        return None
    target = node.targets[0]
    if isinstance(target, (ast.Tuple, ast.List)) and not any(
        isinstance(e, ast.Starred) for e in target.elts
    ):
        return len(target.elts)
    return None
