"""GS302, GS303: work a Function does for nothing (GS301 is in _needs_grad)."""

from __future__ import annotations

import ast

from gradsmith.linter._facts import Facts, is_ctx_call
from gradsmith.linter._registry import Rule, checker
from gradsmith.linter._symbols import dotted
from gradsmith.linter.rules._common import attr_of, last_name, nodes, own, short
from gradsmith.linter.rules._composite import composite_op

_H = "import torch\n\n\nclass Fn(torch.autograd.Function):\n    @staticmethod\n"
GS302 = Rule(
    "GS302", "reimplements-builtin", "info",
    "The Function re-implements a differentiable builtin (one call, or its formula written "
    "out, such as GELU's tanh form, softplus or logsumexp) with its standard gradient",
    "PyTorch's own op is faster, supports double backward, vmap, compile and mixed "
    "precision, and is already correct.",
    "call the builtin (e.g. `torch.sigmoid(x)`) and let autograd differentiate it.",
    bad="import torch\n\n\nclass Fn(torch.autograd.Function):  # GS302\n    @staticmethod\n"
    "    def forward(ctx, x):\n        y = torch.sigmoid(x)\n"
    "        ctx.save_for_backward(y)\n        return y\n\n    @staticmethod\n"
    "    def backward(ctx, g):\n        (y,) = ctx.saved_tensors\n        return g * y * (1 - y)\n",
    good="import torch\n\n\ndef sigmoid(x):\n    return torch.sigmoid(x)\n",
    brief="re-implements a builtin",
)
GS303 = Rule(
    "GS303", "host-sync-in-backward", "info",
    "`.item()`, `.tolist()` or `.cpu()` in backward",
    "Each forces a device-to-host copy and synchronisation in the middle of the backward "
    "pass (and a graph break under torch.compile).",
    "keep values on the device as tensors; compute Python numbers in forward and store them "
    "on ctx.",
    bad=_H + "    def forward(ctx, x):\n        ctx.save_for_backward(x)\n        return x * x.max()\n\n"
    "    @staticmethod\n    def backward(ctx, g):\n        (x,) = ctx.saved_tensors\n"
    "        m = x.max().item()  # GS303\n        return g * m\n",
    good=_H + "    def forward(ctx, x):\n        ctx.m = x.max().item()\n        return x * ctx.m\n\n"
    "    @staticmethod\n    def backward(ctx, g):\n        return g * ctx.m\n",
    brief="host sync in backward",
)

#: Single builtin ops -> numeric literals their standard gradient formula may contain.
_BUILTIN = {
    "relu": {0, 1}, "exp": {0, 1}, "log": {0, 1}, "sigmoid": {0, 1}, "tanh": {0, 1},
    "sin": {0, 1}, "cos": {0, 1}, "sqrt": {0, 1, 2, 0.5}, "square": {0, 1, 2},
    "matmul": {0, 1}, "mm": {0, 1}, "bmm": {0, 1}, "add": {0, 1}, "mul": {0, 1},
    "sub": {0, 1, -1}, "neg": {0, 1, -1}, "softplus": {0, 1}, "clamp": {0, 1},
    "clamp_min": {0, 1}, "abs": {0, 1}, "silu": {0, 1}, "log1p": {0, 1}, "expm1": {0, 1},
    "sum": {0, 1}, "mean": {0, 1},
}
_BINOPS = {ast.Add: ({0, 1}, "+"), ast.Sub: ({0, 1, -1}, "-"), ast.Mult: ({0, 1}, "*"),
           ast.MatMult: ({0, 1}, "@"), ast.Pow: ({0, 1, 2}, "**")}
_BUILTINS = frozenset(dir(__import__("builtins")))
_CUSTOM = {"clamp", "clip", "clamp_", "sign", "round", "normalize", "clip_grad_norm_", "where",
           "randn_like", "rand_like", "nan_to_num"}


def _is_guard(test: ast.expr, guards: set[str]) -> bool:
    return any(
        (isinstance(n, ast.Attribute) and n.attr == "needs_input_grad")
        or (isinstance(n, ast.Name) and n.id in guards)
        for n in ast.walk(test)
    )


@checker(GS303)
def check_host_sync(facts: Facts, report) -> None:
    for method in own(facts, "backward"):
        src = method.source
        for node in nodes(method):
            if isinstance(node, ast.Call) and last_name(node.func) in ("item", "tolist", "cpu") \
                    and isinstance(node.func, ast.Attribute) and not node.args:
                report("GS303", src, node, f"`{short(src.segment(node))}`")


def _single_op(expr: ast.expr, inputs: set[str], resolve, operands=None) -> str | None:
    """Name of the single builtin op ``expr`` applies directly to inputs, else None."""
    operands = operands if operands is not None else set()

    def plain(e):
        if isinstance(e, ast.Name):
            return e.id in inputs
        if isinstance(e, ast.Constant):
            return isinstance(e.value, (int, float))
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr in (
            "t", "transpose"
        ):
            return plain(e.func.value)
        return isinstance(e, ast.Attribute) and e.attr in ("T", "mT") and plain(e.value)

    if isinstance(expr, ast.BinOp) and type(expr.op) in _BINOPS:
        if plain(expr.left) and plain(expr.right) and not isinstance(
            expr.left, ast.Constant
        ) and not isinstance(expr.right, ast.Constant):
            operands.update(n.id for n in ast.walk(expr) if isinstance(n, ast.Name))
            return _BINOPS[type(expr.op)][1]
        return None
    if not isinstance(expr, ast.Call):
        return None
    parts = dotted(expr.func)
    name = parts[-1] if parts else None
    if name not in _BUILTIN:
        return None
    args = list(expr.args)
    if parts and resolve(parts) is None:  # a method: x.relu()
        if not isinstance(expr.func, ast.Attribute):
            return None
        args.insert(0, expr.func.value)
    if name in ("clamp", "clamp_min"):
        kws = {k.arg: k.value for k in expr.keywords}
        if set(kws) - {"min"} or len(args) > 1 and name == "clamp":
            return None
        bound = kws.get("min", args[1] if len(args) > 1 else None)
        if not (isinstance(bound, ast.Constant) and bound.value == 0):
            return None
    elif not all(k.arg and plain(k.value) for k in expr.keywords):
        return None
    if not args or not all(plain(a) for a in args):
        return None
    operands.update(n.id for a in args for n in ast.walk(a) if isinstance(n, ast.Name))
    return name


def _config_attrs(method, inputs: set[str], ctx) -> set[str]:
    """ctx attributes forward fills with settings (shapes, dims, flags), not tensors."""
    from gradsmith.linter._evidence import evidence

    ev = evidence(method, sorted(inputs), ctx)

    def setting(value):
        if isinstance(value, ast.Constant):
            return True
        if isinstance(value, ast.Name):
            return value.id in inputs and ev.get(value.id) is not True
        if isinstance(value, ast.Attribute):
            return value.attr in ("shape", "dtype", "device", "ndim")
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
            return value.func.attr in ("size", "dim", "numel") or (
                isinstance(value.func, ast.Name) and value.func.id in ("float", "int", "bool"))
        return False

    out = set()
    for stmt in method.node.body:
        if not isinstance(stmt, ast.Assign):
            continue
        for target in stmt.targets:
            pairs = [(target, stmt.value)]
            if isinstance(target, ast.Tuple) and isinstance(stmt.value, ast.Tuple):
                pairs = list(zip(target.elts, stmt.value.elts))
            for t, v in pairs:
                if isinstance(t, ast.Attribute) and attr_of(t, ctx, t.attr) and setting(v):
                    out.add(t.attr)
    return out


def _ctx_targets(stmt: ast.Assign, ctx) -> bool:
    targets = []
    for t in stmt.targets:
        targets += t.elts if isinstance(t, ast.Tuple) else [t]
    return all(isinstance(t, ast.Attribute) and attr_of(t, ctx, t.attr) for t in targets)


def _body_op(method, inputs: set[str], ctx, resolve, operands: set) -> str | None:
    bound: dict[str, str] = {}
    result = None
    for stmt in method.node.body:
        if isinstance(stmt, ast.Expr) and (
            isinstance(stmt.value, ast.Constant)
            or (isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Attribute)
                and isinstance(stmt.value.func.value, ast.Name) and stmt.value.func.value.id == ctx)
        ):
            continue
        if isinstance(stmt, ast.Assign) and _ctx_targets(stmt, ctx):
            continue
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(
                stmt.targets[0], ast.Name) and not bound:
            op = _single_op(stmt.value, inputs, resolve, operands)
            if op is None:
                return None
            bound[stmt.targets[0].id] = op
            continue
        if isinstance(stmt, ast.Return) and stmt.value is not None and result is None:
            if isinstance(stmt.value, ast.Name) and stmt.value.id in bound:
                result = bound[stmt.value.id]
            elif not bound:
                result = _single_op(stmt.value, inputs, resolve, operands)
            if result is None:
                return None
            continue
        return None
    return result


def _literals_ok(method, allowed: set) -> bool:
    for node in nodes(method):
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
                and not isinstance(node.value, bool) and node.value not in allowed:
            return False
        if isinstance(node, ast.Call) and last_name(node.func) in _CUSTOM:
            return False
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and -1 not in allowed \
                and not (isinstance(node.operand, ast.Constant)):
            return False
    return True


@checker(GS302)
def check_builtin(facts: Facts, report) -> None:
    fwd, bwd = facts.method("forward"), facts.method("backward")
    if fwd is None or bwd is None or "forward" not in facts.fc.own or facts.inputs is None:
        return
    if facts.inputs[2] or "setup_context" in facts.fc.methods and facts.method("setup_context") is None:
        return
    operands: set[str] = set()
    op = _body_op(fwd, set(facts.inputs[0]), facts.ctx_of(fwd), facts.resolver(fwd), operands)
    if op is None:
        _check_composite(facts, fwd, bwd, report)
        return
    allowed = _BUILTIN.get(op) or next(a for a, s in _BINOPS.values() if s == op)
    if any(is_ctx_call(n, facts.ctx_of(bwd), "mark_non_differentiable") for n in nodes(bwd)):
        return
    ctx = facts.ctx_of(bwd)
    allowed_attrs = {"saved_tensors", "needs_input_grad"} | _config_attrs(
        fwd, set(facts.inputs[0]), facts.ctx_of(fwd))
    for node in nodes(bwd):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id == ctx and node.attr not in allowed_attrs:
            return  # backward uses state beyond the standard formula's inputs
        if isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple) and any(
            isinstance(e, ast.Constant) and e.value is None and i < len(facts.inputs[0])
            and facts.inputs[0][i] in operands
            for i, e in enumerate(node.value.elts)
        ):
            return  # deliberately blocks the gradient of an operand
    if _literals_ok(bwd, allowed | {0.0, 1.0}):
        report("GS302", facts.fc.source, facts.fc.node, f"forward is just `{op}`")


def _check_composite(facts: Facts, fwd, bwd, report) -> None:
    """A builtin written out as its formula (GELU's tanh form, softplus, logsumexp...)."""
    name = composite_op(fwd, set(facts.inputs[0]), facts.ctx_of(fwd))
    if name is None:
        return
    ctx = facts.ctx_of(bwd)
    for node in nodes(bwd):
        if isinstance(node, ast.Call) and last_name(node.func) in _CUSTOM:
            return  # a deliberately different gradient (clipped, straight-through...)
        if is_ctx_call(node, ctx, "mark_non_differentiable"):
            return
    report("GS302", facts.fc.source, facts.fc.node, f"forward writes out `{name}`")
