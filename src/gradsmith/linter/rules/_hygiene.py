"""GS201-GS207, GS210, GS211: fragile, deprecated or double-backward-breaking code."""

from __future__ import annotations

import ast

from gradsmith.linter import _tensors as T
from gradsmith.linter._facts import Facts
from gradsmith.linter._finding import Edit
from gradsmith.linter._flow import Flow
from gradsmith.linter._registry import Rule, checker
from gradsmith.linter._symbols import dotted
from gradsmith.linter.rules._common import (
    attr_of,
    last_name,
    nodes,
    once_differentiable,
    own,
    short,
)
from gradsmith.linter.rules._raw_grad import raw_gradient

_H = "import torch\n\n\nclass Fn(torch.autograd.Function):\n    @staticmethod\n"
_B = "\n    @staticmethod\n    def backward(ctx, g):\n"
_OD = ("import torch\nfrom torch.autograd.function import once_differentiable\n\n\n"
       "class Fn(torch.autograd.Function):\n    @staticmethod\n")
GS201 = Rule(
    "GS201", "dot-data", "warning",
    "`.data` is used inside a Function",
    "`.data` hides the tensor from autograd's version tracking: in-place changes through it "
    "go undetected and gradients are silently wrong.",
    "use `.detach()` (shares storage but keeps version checks), or drop it: forward already "
    "runs without grad tracking.",
    bad=_H + "    def forward(ctx, x):\n        ctx.save_for_backward(x.data)  # GS201\n"
    "        return x * 2\n" + _B + "        return g * 2\n",
    good=_H + "    def forward(ctx, x):\n        ctx.save_for_backward(x)\n        return x * 2\n"
    + _B + "        return g * 2\n",
    autofix=True,
    brief="`.data` in a Function",
)
GS202 = Rule(
    "GS202", "saved-variables", "warning",
    "ctx.saved_variables is deprecated",
    "It is the pre-0.4 name of saved_tensors and warns on every use.",
    "use `ctx.saved_tensors`.",
    bad=_H + "    def forward(ctx, x):\n        ctx.save_for_backward(x)\n        return x * x\n"
    + _B + "        (x,) = ctx.saved_variables  # GS202\n        return 2 * x * g\n",
    good=_H + "    def forward(ctx, x):\n        ctx.save_for_backward(x)\n        return x * x\n"
    + _B + "        (x,) = ctx.saved_tensors\n        return 2 * x * g\n",
    autofix=True,
    brief="deprecated ctx.saved_variables",
)
GS203 = Rule(
    "GS203", "detach-in-backward", "warning",
    "`.detach()` in a backward that is not @once_differentiable",
    "backward runs with grad mode on when create_graph=True; detaching cuts the graph of the "
    "gradient, so second derivatives are silently wrong (zero).",
    "keep backward differentiable (no detach), or decorate it with @once_differentiable so "
    "double backward raises instead of lying.",
    bad=_H + "    def forward(ctx, x):\n        ctx.save_for_backward(x)\n        return x * x\n"
    + _B + "        (x,) = ctx.saved_tensors\n        return 2 * x.detach() * g  # GS203\n",
    good=_H + "    def forward(ctx, x):\n        ctx.save_for_backward(x)\n        return x * x\n"
    + _B + "        (x,) = ctx.saved_tensors\n        return 2 * x * g\n",
    brief="`.detach()` in a differentiable backward",
)
GS204 = Rule(
    "GS204", "no-grad-in-backward", "warning",
    "A no-grad block (torch.no_grad, inference_mode, set_grad_enabled(False)) in a backward "
    "that is not @once_differentiable",
    "Gradients computed there are not recorded when create_graph=True, so second "
    "derivatives are silently wrong.",
    "remove the block, or decorate backward with @once_differentiable.",
    bad=_H + "    def forward(ctx, x):\n        ctx.save_for_backward(x)\n        return x * x\n"
    + _B + "        (x,) = ctx.saved_tensors\n        with torch.no_grad():  # GS204\n"
    "            return 2 * x * g\n",
    good=_OD + "    def forward(ctx, x):\n        ctx.save_for_backward(x)\n        return x * x\n"
    "\n    @staticmethod\n    @once_differentiable\n    def backward(ctx, g):\n"
    "        (x,) = ctx.saved_tensors\n        with torch.no_grad():\n            return 2 * x * g\n",
    brief="no-grad block in a differentiable backward",
)
GS206 = Rule(
    "GS206", "returns-input-view", "info",
    "forward returns an input (or a view of it) that is not marked dirty",
    "The output aliases the input: modifying either in place later raises 'a view created "
    "inside a custom Function ... is being modified in-place'. Returning `*inputs` as they "
    "came (a DDP-style sink's `return inputs`) does so for every one, also for inputs that "
    "need no gradient (`x /= 255` in the wrapped model raises).",
    "return a new tensor (`x.clone()`, `tuple(t.clone() for t in inputs)` as torch's own "
    "DDP sink does), or mark_dirty if you modified the input in place.",
    bad=_H + "    def forward(ctx, x):\n        return x.view(-1)  # GS206\n" + _B
    + "        return g\n",
    good=_H + "    def forward(ctx, x):\n        return x.reshape(-1).clone()\n" + _B
    + "        return g\n",
    brief="forward returns an input or a view of it",
)
GS207 = Rule(
    "GS207", "numpy-in-backward", "warning",
    "`.numpy()` (or a gradient built from a non-torch function's values) in a backward that "
    "is not @once_differentiable",
    "NumPy leaves autograd: the gradient cannot be differentiated again, so second "
    "derivatives are silently wrong. So does returning `torch.tensor(f(...))` (or "
    "`as_tensor`, `from_numpy`) of what a function outside torch computed "
    "(`torch.tensor(lib.backprop(grad.cpu(), ...))`): the values arrive without a graph.",
    "compute with torch ops, or decorate backward with @once_differentiable.",
    bad=_H + "    def forward(ctx, x):\n        return x * 2\n" + _B
    + "        return torch.from_numpy(g.numpy() * 2)  # GS207\n",
    good=_OD + "    def forward(ctx, x):\n        return x * 2\n\n    @staticmethod\n"
    "    @once_differentiable\n    def backward(ctx, g):\n        return torch.from_numpy(g.numpy() * 2)\n",
    brief="NumPy/outside values in a differentiable backward",
)
GS210 = Rule(
    "GS210", "legacy-constructor", "warning",
    "Legacy tensor constructor (`torch.Tensor(...)`, `torch.FloatTensor(...)`) in a Function",
    "It ignores the inputs' dtype and device (float32 on CPU), so the result breaks on GPU "
    "or double precision and is not traceable.",
    "use `torch.empty(..., dtype=x.dtype, device=x.device)`, `x.new_empty(...)` or "
    "`torch.tensor(data, dtype=..., device=...)`.",
    bad=_H + "    def forward(ctx, x):\n        out = torch.Tensor(x.shape)  # GS210\n"
    "        out.copy_(x)\n        return out\n" + _B + "        return g\n",
    good=_H + "    def forward(ctx, x):\n        return x.clone()\n" + _B + "        return g\n",
    brief="legacy tensor constructor",
)
GS211 = Rule(
    "GS211", "alloc-without-dtype", "warning",
    "A new tensor is allocated in forward/backward without a dtype",
    "It gets the default dtype (float32) whatever the inputs' dtype, so float64 "
    "(gradcheck) or half precision outputs and gradients fail or lose precision.",
    "use `torch.zeros_like(x)` / `g.new_zeros(shape)`, or pass `dtype=` and `device=`.",
    bad=_H + "    def forward(ctx, x):\n        ctx.shape = x.shape\n        return x.sum()\n" + _B
    + "        return torch.zeros(ctx.shape) + g  # GS211\n",
    good=_H + "    def forward(ctx, x):\n        ctx.shape = x.shape\n        return x.sum()\n" + _B
    + "        return g.expand(ctx.shape).clone()\n",
    brief="allocation without dtype",
)


def _parents(method) -> dict[int, ast.AST]:
    parents = {}
    for node in nodes(method):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
    return parents


def _mutated_names(method) -> set[str]:
    """Names that are modified in place somewhere in ``method`` (syntactically)."""
    out = set()
    for n in nodes(method):
        target = None
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and T.is_inplace_name(
            n.func.attr
        ):
            target = n.func.value
        elif isinstance(n, ast.AugAssign):
            target = n.target
        elif isinstance(n, ast.Assign):
            for t in n.targets:
                if isinstance(t, ast.Subscript):
                    target = t.value
        while isinstance(target, (ast.Subscript, ast.Attribute)):
            target = target.value
        if isinstance(target, ast.Name):
            out.add(target.id)
    return out


def _data_fix(src, node: ast.Attribute, parents, mutated: set[str]) -> tuple[Edit, ...]:
    """``.data`` -> ``.detach()`` unless something writes through the result in place.

    Writing through ``.data`` bypasses the version counter; through ``.detach()`` it does
    not, so such code could start raising: those uses are left for a human.
    """
    parent = parents.get(id(node))
    if not isinstance(node.ctx, ast.Load):
        return ()
    if isinstance(parent, ast.Attribute) and T.is_inplace_name(parent.attr):
        return ()  # `p.data.add_()` through detach would bump p's version counter
    if isinstance(parent, ast.Subscript) and not isinstance(parent.ctx, ast.Load):
        return ()
    if isinstance(parent, ast.Call) and (
        any(k.arg == "out" and k.value is node for k in parent.keywords)
        or (node in parent.args and T.is_inplace_name(last_name(parent.func) or ""))
    ):
        return ()  # `torch.nn.init.normal_(p.data)`, `torch.add(a, b, out=p.data)`
    if isinstance(parent, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id in mutated for t in parent.targets
    ):
        return ()  # `y = p.data; y.add_(1)`
    start = src.end(node.value)
    return (Edit(start, src.end(node), ".detach()"),)


GS305 = Rule(
    "GS305", "host-roundtrip-in-forward", "info",
    "`.numpy()`, `.tolist()` or `.item()` in forward",
    "The value leaves the device and torch: a host synchronisation, a graph break under "
    "torch.compile, and torch.func (vmap, grad) cannot trace it (outside a Function it would "
    "also cut the gradient).",
    "compute with torch ops on the device; if NumPy is required, add a `vmap` staticmethod "
    "and keep it out of compiled regions.",
    bad=_H + "    def forward(ctx, x):\n        y = torch.from_numpy(x.numpy() ** 2)  # GS305\n"
    "        ctx.save_for_backward(x)\n        return y\n" + _B
    + "        (x,) = ctx.saved_tensors\n        return g * x * 2\n",
    good=_H + "    def forward(ctx, x):\n        ctx.save_for_backward(x)\n        return x.square()\n"
    + _B + "        (x,) = ctx.saved_tensors\n        return g * x * 2\n",
    brief="host round-trip in forward",
)
@checker(GS201, GS202, GS203, GS204, GS207, GS210, GS211, GS305)
def check_hygiene(facts: Facts, report) -> None:
    for method in own(facts, "forward", "backward", "setup_context", "jvp", "vjp", "vmap"):
        src = method.source
        ctx = facts.ctx_of(method)
        parents = _parents(method)
        mutated = _mutated_names(method)
        resolve = facts.resolver(method)
        in_backward = method.name in ("backward", "vjp")
        lax = once_differentiable(method) or not in_backward
        for node in nodes(method):
            if isinstance(node, ast.Attribute):
                if node.attr == "data" and not (isinstance(node.value, ast.Name) and node.value.id == ctx):
                    if not isinstance(node.ctx, ast.Store):
                        report("GS201", src, node, f"`{short(src.segment(node))}`",
                               _data_fix(src, node, parents, mutated))
                elif attr_of(node, ctx, "saved_variables"):
                    line, col = src.end(node)
                    fix = (Edit((line, col - len("saved_variables")), (line, col), "saved_tensors"),)
                    report("GS202", src, node, "", fix)
            elif isinstance(node, ast.Call):
                parts = dotted(node.func)
                qual = resolve(parts) if parts else None
                name = last_name(node.func)
                if qual and name in T.LEGACY_CTORS:
                    report("GS210", src, node, f"`{'.'.join(parts)}(...)`")
                if qual and name in T.ALLOC_NO_DTYPE and not any(
                    k.arg in ("dtype", None, "out") for k in node.keywords
                ) and qual.rpartition(".")[0] == "torch" and method.name in ("forward", "backward") \
                        and not _placeholder(node) and not (
                            isinstance(parents.get(id(node)), ast.Attribute)
                            and parents[id(node)].attr in _CASTS):
                    report("GS211", src, node, f"`{'.'.join(parts)}(...)`")
                if method.name == "forward" and name in ("numpy", "tolist", "item") and isinstance(
                    node.func, ast.Attribute
                ) and not qual and not node.args:
                    report("GS305", src, node, f"`{short(src.segment(node))}`")
                if not in_backward or lax:
                    continue
                if name in ("detach", "detach_") and isinstance(node.func, ast.Attribute):
                    report("GS203", src, node, f"`{short(src.segment(node))}`")
                elif name == "numpy" and isinstance(node.func, ast.Attribute) and not qual:
                    report("GS207", src, node, f"`{short(src.segment(node))}`")
                elif raw_gradient(node, qual, parents, resolve):
                    report("GS207", src, node, f"`{short(src.segment(node))}` (values from "
                           "outside autograd)")
            elif isinstance(node, (ast.With, ast.AsyncWith)) and in_backward and not lax:
                for item in node.items:
                    if _no_grad(item.context_expr, resolve):
                        report("GS204", src, item.context_expr, f"`{short(src.segment(item.context_expr))}`")
        if in_backward and not lax and any(_no_grad(d, resolve) for d in method.node.decorator_list):
            report("GS204", src, method.node, "decorated with a no-grad context")


def _placeholder(call: ast.Call) -> bool:
    """``torch.empty(())`` / ``torch.empty(0)``: a stand-in with no values (for a None)."""
    if len(call.args) != 1:
        return False
    arg = call.args[0]
    if isinstance(arg, (ast.Tuple, ast.List)):
        return not arg.elts or (len(arg.elts) == 1 and isinstance(arg.elts[0], ast.Constant)
                                and arg.elts[0].value == 0)
    return isinstance(arg, ast.Constant) and arg.value == 0


#: Conversions chained onto an allocation that fix its dtype: `torch.zeros(n).type(x.dtype)`.
_CASTS = frozenset({"type", "to", "type_as", "float", "double", "half", "bfloat16", "long",
                    "int", "bool", "short", "byte", "char"})


def _no_grad(expr: ast.expr, resolve) -> bool:
    call = expr if isinstance(expr, ast.Call) else None
    parts = dotted(call.func if call else expr)
    if not parts or not resolve(parts):
        return False
    name = parts[-1]
    if name in ("no_grad", "inference_mode"):
        return not (call and call.args and isinstance(call.args[0], ast.Constant)
                    and call.args[0].value is False)
    if name == "set_grad_enabled" and call and call.args:
        return isinstance(call.args[0], ast.Constant) and call.args[0].value is False
    return False


@checker(GS206)
def check_returned_alias(facts: Facts, report) -> None:
    dirty, unknown = facts.dirty
    if unknown:
        return
    for method in own(facts, "forward"):
        star = _unbound_vararg(method.node)

        def visit(stmt, flow: Flow, method=method, star=star):
            if not isinstance(stmt, ast.Return) or stmt.value is None:
                return
            if isinstance(stmt.value, ast.Name) and stmt.value.id == star and not dirty:
                report("GS206", method.source, stmt.value,  # each output is its input
                       f"`{star}` returns the inputs `*{star}` themselves")
                return
            values = stmt.value.elts if isinstance(stmt.value, ast.Tuple) else [stmt.value]
            for value in values:
                val = flow.eval(value)
                names = {o[6:] for o in val.origins if o.startswith("input:")} - dirty - {"*"}
                if names and (val.tensor or isinstance(value, ast.Name)) and not isinstance(
                    value, ast.Starred
                ):
                    report("GS206", method.source, value,
                           f"`{short(method.source.segment(value))}` aliases input `{sorted(names)[0]}`")

        facts.walk(method, visit)


def _unbound_vararg(node: ast.FunctionDef) -> str | None:
    """The name of forward's ``*args`` when no statement rebinds it."""
    star = node.args.vararg.arg if node.args.vararg is not None else None
    if star is not None and any(isinstance(n, ast.Name) and n.id == star and isinstance(
            n.ctx, ast.Store) for n in ast.walk(node)):
        return None
    return star
