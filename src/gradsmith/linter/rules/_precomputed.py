"""GS222: a gradient computed in forward and returned (as is, or scaled by grad_output) from a
backward that double backward differentiates."""

from __future__ import annotations

import ast

from gradsmith.linter._evidence import evidence
from gradsmith.linter._facts import Facts
from gradsmith.linter._flow import walk_shallow
from gradsmith.linter._kernels import finder, launched
from gradsmith.linter._registry import Rule, checker
from gradsmith.linter.rules._common import once_differentiable, own, short, trivial
from gradsmith.linter.rules._fallthrough import _items
from gradsmith.linter.rules._precomputed_only import forward_values_only
from gradsmith.linter.rules._unread import _DISCRETE_CALLS

_CLS = "import torch\n\n\nclass XExp(torch.autograd.Function):\n    @staticmethod\n" \
       "    def forward(ctx, x):\n        e = x.exp()\n        ctx.save_for_backward(e * (1 + x))\n" \
       "        return x * e\n\n"
GS222 = Rule(
    "GS222", "precomputed-gradient", "warning",
    "backward returns a gradient computed in forward (as is, or times grad_output), or "
    "built from values forward computed while reading no input that gets a gradient, and "
    "is not @once_differentiable",
    "forward runs without autograd, so the saved gradient has no graph back to the inputs: "
    "a second derivative (create_graph=True, gradgradcheck, Hessian-vector products) treats "
    "it as a constant and is silently zero or wrong instead of raising.",
    "decorate backward with `@once_differentiable` (from torch.autograd.function) so double "
    "backward raises, or save the inputs and compute the gradient in backward with torch "
    "operations.",
    bad=_CLS + "    @staticmethod\n    def backward(ctx, g):\n        (dy_dx,) = ctx.saved_tensors\n"
    "        return g * dy_dx  # GS222\n",
    good="from torch.autograd.function import once_differentiable\n" + _CLS
    + "    @staticmethod\n    @once_differentiable\n    def backward(ctx, g):\n"
    "        (dy_dx,) = ctx.saved_tensors\n        return g * dy_dx\n",
    brief="gradient precomputed in forward: double backward treats it as a constant",
)

#: Calls whose result has no graph back to their arguments: they read only a tensor's
#: shape/dtype/device, or build a tensor from Python values (`torch.tensor(alpha)`).
_SHAPE_ONLY = frozenset(
    """empty_like zeros_like ones_like full_like empty zeros ones full new_empty new_zeros
    new_ones new_full size dim numel stride tensor as_tensor scalar_tensor new_tensor""".split()
)
_SHAPE_ATTRS = frozenset({"shape", "dtype", "device", "ndim", "is_cuda", "requires_grad"})
#: Methods that keep the values of their receiver (views, casts, copies).
_SAME_VALUES = frozenset(
    """view view_as reshape reshape_as contiguous to type_as float double half bfloat16
    squeeze unsqueeze flatten expand expand_as transpose t permute clone detach""".split()
)


def _call_name(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _value_names(expr: ast.expr) -> set[str]:
    """Names whose values ``expr`` reads (not through ``.shape``, ``empty_like(x)``...)."""
    out: set[str] = set()
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Attribute) and node.attr in _SHAPE_ATTRS:
            continue
        if isinstance(node, ast.Call) and _call_name(node) in _SHAPE_ONLY:
            continue
        if isinstance(node, (ast.Lambda, ast.FunctionDef)):
            continue
        if isinstance(node, ast.Name):
            out.add(node.id)
        stack.extend(ast.iter_child_nodes(node))
    return out


def _smooth_op(expr: ast.expr) -> bool:
    """Computed with operations (not a bare name or view), none piecewise constant."""
    if isinstance(expr, ast.Call) and _call_name(expr) in _SAME_VALUES and isinstance(
            expr.func, ast.Attribute):
        return _smooth_op(expr.func.value)
    computed = False
    for node in ast.walk(expr):
        if isinstance(node, ast.Compare) or isinstance(node, ast.Call) and (
                _call_name(node) in _DISCRETE_CALLS or _call_name(node) in _SHAPE_ONLY):
            return False
        if isinstance(node, (ast.BinOp, ast.Call)):
            computed = True
    return computed


def _tensor_op(expr: ast.expr) -> bool:
    """A call that returns a tensor (not ``int``/``float``/``len``/``math.*``...)."""
    for node in ast.walk(expr):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in _BUILTINS:
            continue
        if isinstance(func, ast.Attribute) and (func.attr in _NUMBER_METHODS or isinstance(
                func.value, ast.Name) and func.value.id in ("math", "np", "numpy")):
            continue
        return True
    return False


_BUILTINS = frozenset({"int", "float", "len", "abs", "min", "max", "round", "sum", "pow", "bool"})
_NUMBER_METHODS = frozenset({"item", "size", "dim", "numel", "stride", "tolist"})


def _forward_gradients(facts: Facts, method) -> tuple[set[str], set[int]]:
    """ctx attributes and save_for_backward positions holding values forward computed from
    its inputs with smooth operations (not the inputs, views of them or outputs)."""
    inputs = set(facts.inputs[0]) if facts.inputs else set()
    ctx = facts.ctx_of(method) if method.name == "forward" else (
        method.params[0] if method.params else None)
    stmts = sorted((n for n in walk_shallow(method.node) if isinstance(n, ast.stmt)),
                   key=lambda n: (n.lineno, n.col_offset))
    returned = {n.id for r in stmts if isinstance(r, ast.Return) and r.value is not None
                for n in (_items(r.value) or [r.value]) if isinstance(n, ast.Name)}
    ev = evidence(method, sorted(inputs), ctx, facts.resolver(method),
                  passed=facts.passed_tensors) if method.name == "forward" else {}
    tensors = {n for n in inputs if ev.get(n) is True}  # names surely holding tensors
    derived: set[str] = set()  # names holding values computed from the inputs
    computed: set[str] = set()  # ... with smooth tensor operations
    attrs: set[str] = set()
    slots: set[int] = set()
    for stmt in stmts:
        if isinstance(stmt, ast.Assign):
            reads = _value_names(stmt.value) & (inputs | derived)
            tensor = _tensor_op(stmt.value) or bool(_value_names(stmt.value) & tensors)
            for target in stmt.targets:
                for name in (t.id for t in ast.walk(target) if isinstance(t, ast.Name)):
                    (derived.add if reads else derived.discard)(name)
                    (tensors.add if tensor else tensors.discard)(name)
                    smooth = reads and _smooth_op(stmt.value) or isinstance(
                        stmt.value, ast.Name) and stmt.value.id in computed
                    (computed.add if smooth else computed.discard)(name)
                # on ctx anything can be kept (numbers too): a tensor needs evidence, while
                # save_for_backward takes tensors only
                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                        and target.value.id == ctx and reads and tensor and (
                        _smooth_op(stmt.value) or isinstance(stmt.value, ast.Name)
                        and stmt.value.id in computed and stmt.value.id not in returned):
                    attrs.add(target.attr)
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            call = stmt.value
            if launched(call) is not None or _runs_kernel(facts, call):
                # a kernel (or a helper launching one) fills its buffers from its inputs
                args = [a for a in (*call.args, *(k.value for k in call.keywords))
                        if isinstance(a, ast.Name)]
                if any(a.id in inputs | derived for a in args):
                    filled = {a.id for a in args if a.id not in inputs | derived}
                    derived |= filled
                    computed |= filled
            elif (saved := facts.saved_args(call, ctx)) is not None:
                # a direct save, or a helper's (`save(ctx, dx)`): the same slots
                for i, arg in enumerate(saved):
                    if isinstance(arg, ast.Starred):
                        break
                    if isinstance(arg, ast.Name) and arg.id in computed \
                            and arg.id not in returned or not isinstance(arg, ast.Name) \
                            and _value_names(arg) & (inputs | derived) and _smooth_op(arg):
                        slots.add(i)
    return attrs, slots


def _runs_kernel(facts: Facts, call: ast.Call) -> bool:
    """``fwd_bwd_triton(x=x, x_grad=x_grad)``: a custom op, or a helper of the linted code
    that launches a custom kernel (followed as GS215 follows backward's helpers)."""
    from gradsmith.linter.rules._kernels import _opaque, _via_helper

    sym = facts.sym_of[id(facts.fc.source)]
    find = finder(sym, facts.sym_of)
    return bool(_opaque(call, find) or _via_helper(call, facts.fc.source.functions, find,
                                                   facts.sym_of))


def _backward_names(bwd, ctx: str | None, attrs: set[str], slots: set[int],
                    scales: set[str]) -> set[str]:
    """Locals of backward bound to the precomputed gradients; ``scales`` gets the locals
    computed from grad_output alone (``scale = grad_output.float()``)."""
    names: set[str] = set()
    for stmt in sorted((n for n in walk_shallow(bwd.node) if isinstance(n, ast.Assign)),
                       key=lambda n: (n.lineno, n.col_offset)):
        value = stmt.value
        for target in stmt.targets:
            if isinstance(target, (ast.Tuple, ast.List)) and _saved(value, ctx):
                for i, elt in enumerate(target.elts):
                    if isinstance(elt, ast.Name):
                        (names.add if i in slots else names.discard)(elt.id)
            elif isinstance(target, (ast.Tuple, ast.List)) and not _value_names(value):
                # `(B,) = ans_grad.shape`: sizes, numbers like the constants
                scales.update(e.id for e in target.elts if isinstance(e, ast.Name))
            elif isinstance(target, ast.Name):
                hit = _precomputed(value, ctx, attrs, names, slots, scales)
                (names.add if hit else names.discard)(target.id)
                read = _value_names(value)
                (scales.add if read and read <= scales else scales.discard)(target.id)
    return names


def _saved(expr: ast.expr, ctx: str | None) -> bool:
    return isinstance(expr, ast.Attribute) and expr.attr in ("saved_tensors", "saved_variables") \
        and isinstance(expr.value, ast.Name) and expr.value.id == ctx


def _precomputed(expr, ctx, attrs, names, slots, scales) -> bool:
    """``expr`` is a precomputed gradient, a view of it, or it times grad_output/a constant
    (``scales``: names of grad_output, of values computed from it alone, and ctx)."""
    if isinstance(expr, ast.Name):
        return expr.id in names
    if isinstance(expr, ast.Attribute):
        return isinstance(expr.value, ast.Name) and expr.value.id == ctx and expr.attr in attrs
    if isinstance(expr, ast.Subscript) and _saved(expr.value, ctx):
        index = expr.slice
        return isinstance(index, ast.Constant) and index.value in slots
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
        name = expr.func.attr
        if name in _SAME_VALUES:
            return _precomputed(expr.func.value, ctx, attrs, names, slots, scales)
        if name in ("mul", "div") and len(expr.args) == 1:
            sides = (expr.func.value, expr.args[0])
        else:
            return False
    elif isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Mult, ast.Div)):
        sides = (expr.left, expr.right)
    else:
        return False
    for mine, other in (sides, sides[::-1]):
        if _precomputed(mine, ctx, attrs, names, slots, scales) and _value_names(other) <= scales:
            return True
    return False


@checker(GS222)
def check_precomputed_gradient(facts: Facts, report) -> None:
    backwards = [m for m in own(facts, "backward") if not once_differentiable(m)
                 and not trivial(m.node.body)]
    if not backwards:
        return
    attrs: set[str] = set()
    slots: set[int] = set()
    for method in own(facts, "forward", "setup_context"):
        a, s = _forward_gradients(facts, method)
        attrs |= a
        slots |= s
    if not attrs and not slots:
        return
    for bwd in backwards:
        ctx = facts.ctx_of(bwd)
        scales = {*bwd.params[1:], ctx}  # grad_output, numbers kept on ctx, constants
        names = _backward_names(bwd, ctx, attrs, slots, scales)
        for ret in (n for n in walk_shallow(bwd.node) if isinstance(n, ast.Return)):
            items = _items(ret.value) or ([e for e in ret.value.elts if not isinstance(
                e, ast.Starred)] if isinstance(ret.value, ast.Tuple) else [ret.value])
            for item in items:  # `return x_grad, *[None] * 4` too
                if item is not None and _precomputed(item, ctx, attrs, names, slots, scales):
                    report("GS222", bwd.source, item, f"`{short(ast.unparse(item))}`")
                    return
        hit = forward_values_only(facts, bwd, ctx, slots, _value_names)
        if hit is not None:
            report("GS222", bwd.source, hit, f"`{short(ast.unparse(hit))}`")
            return


__all__ = ["GS222"]
