"""GS104-GS107, GS205, GS213, GS228, GS234: what forward keeps on ctx (the saved tensors' reads are
``_saved_reads``)."""

from __future__ import annotations

import ast

from gradsmith.linter._evidence import evidence, integer_tensor
from gradsmith.linter._facts import Facts, is_ctx_call, statement_nodes
from gradsmith.linter._flow import Flow, Val, walk_shallow
from gradsmith.linter._registry import Rule, checker
from gradsmith.linter.rules._common import CTX_METHODS, attr_of, own, short, terminates
from gradsmith.linter.rules._ctx_release import GS234, released, released_attrs
from gradsmith.linter.rules._latent import GS228, maybe_number, non_differentiable

_H = "import torch\n\n\nclass Fn(torch.autograd.Function):\n    @staticmethod\n"
_B = "\n    @staticmethod\n    def backward(ctx, g):\n"
GS104 = Rule(
    "GS104", "ctx-attr-output", "error",
    "An output tensor is kept as a ctx attribute",
    "The output holds the graph node that holds ctx: a reference cycle autograd cannot free, "
    "so the graph's memory leaks (ctx.save_for_backward breaks the cycle).",
    "use `ctx.save_for_backward(out)` and read it back with `ctx.saved_tensors`.",
    bad=_H + "    def forward(ctx, x):\n        out = x.exp()\n        ctx.out = out  # GS104\n"
    "        return out\n" + _B + "        return g * ctx.out\n",
    good=_H + "    def forward(ctx, x):\n        out = x.exp()\n        ctx.save_for_backward(out)\n"
    "        return out\n" + _B + "        (out,) = ctx.saved_tensors\n        return g * out\n",
    brief="output kept on ctx (a reference-cycle leak)",
)
GS213 = Rule(
    "GS213", "ctx-attr-input", "warning",
    "An input tensor is kept as a ctx attribute",
    "Attributes skip save_for_backward's version check: if the caller modifies the input in "
    "place before backward (`x += f(x)`), the gradient is silently wrong instead of an error; "
    "saved-tensor hooks (offloading, checkpointing) do not apply either.",
    "use `ctx.save_for_backward(w)` and read it back with `ctx.saved_tensors`. Integer index "
    "tensors and masks (no graph) are not reported.",
    bad=_H + "    def forward(ctx, x, w):\n        ctx.w = w  # GS213\n        return x @ w\n" + _B
    + "        return g @ ctx.w.t(), None\n",
    good=_H + "    def forward(ctx, x, w):\n        ctx.save_for_backward(w)\n        return x @ w\n"
    + _B + "        (w,) = ctx.saved_tensors\n        return g @ w.t(), None\n",
    brief="input tensor kept on ctx",
)
GS205 = Rule(
    "GS205", "ctx-attr-tensor", "warning",
    "A tensor computed in forward is stored as a ctx attribute",
    "It is kept alive outside autograd's saved-tensor machinery: no hooks "
    "(saved_tensors_hooks, checkpointing, offloading) and no version checks apply.",
    "pass it to `ctx.save_for_backward(...)` instead (or keep only what you need).",
    bad=_H + "    def forward(ctx, x):\n        ctx.mask = x > 0  # GS205\n        return x.clamp(min=0)\n"
    + _B + "        return g * ctx.mask\n",
    good=_H + "    def forward(ctx, x):\n        ctx.save_for_backward(x > 0)\n"
    "        return x.clamp(min=0)\n" + _B + "        (mask,) = ctx.saved_tensors\n"
    "        return g * mask\n",
    brief="computed tensor kept on ctx",
)
GS105 = Rule(
    "GS105", "save-non-tensor", "error",
    "A non-tensor value is passed to ctx.save_for_backward()",
    "save_for_backward accepts only tensors (or None) and raises TypeError otherwise.",
    "store numbers, shapes and flags as ctx attributes (`ctx.dim = dim`).",
    bad=_H + "    def forward(ctx, x, dim: int):\n        ctx.save_for_backward(x, dim)  # GS105\n"
    "        return x.cumsum(dim)\n" + _B + "        x, dim = ctx.saved_tensors\n"
    "        return g.flip(dim).cumsum(dim).flip(dim), None\n",
    good=_H + "    def forward(ctx, x, dim):\n        ctx.dim = dim\n        return x.cumsum(dim)\n"
    + _B + "        d = ctx.dim\n        return g.flip(d).cumsum(d).flip(d), None\n",
    brief="non-tensor passed to save_for_backward",
)
GS106 = Rule(
    "GS106", "save-twice", "warning",
    "ctx.save_for_backward() is called more than once on one path",
    "Each call replaces what the previous one saved; tensors saved by the first call are "
    "silently dropped.",
    "save everything in a single call.",
    bad=_H + "    def forward(ctx, x, b):\n        ctx.save_for_backward(x)\n"
    "        ctx.save_for_backward(b)  # GS106\n        return x * b\n" + _B
    + "        x, b = ctx.saved_tensors\n        return g * b, g * x\n",
    good=_H + "    def forward(ctx, x, b):\n        ctx.save_for_backward(x, b)\n        return x * b\n"
    + _B + "        x, b = ctx.saved_tensors\n        return g * b, g * x\n",
    brief="save_for_backward called twice on one path",
)
GS107 = Rule(
    "GS107", "saved-tensors-in-forward", "error",
    "ctx.saved_tensors is read in forward/setup_context",
    "Saved tensors are only meaningful in backward; in forward they are empty or stale.",
    "use the local variables you saved.",
    bad=_H + "    def forward(ctx, x):\n        ctx.save_for_backward(x)\n"
    "        (y,) = ctx.saved_tensors  # GS107\n        return y * 2\n" + _B + "        return g * 2\n",
    good=_H + "    def forward(ctx, x):\n        ctx.save_for_backward(x)\n        return x * 2\n"
    + _B + "        return g * 2\n",
    brief="ctx.saved_tensors read in forward",
)
def _output_names(method) -> tuple[set[str], set[str]]:
    """Names forward returns, and names of containers whose elements it returns."""
    names, containers = set(), set()
    for node in walk_shallow(method.node):
        if isinstance(node, ast.Return) and node.value is not None:
            values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
            for v in values:
                if isinstance(v, ast.Starred):
                    v = v.value
                if isinstance(v, ast.Name):
                    names.add(v.id)
                elif isinstance(v, ast.Subscript) and isinstance(v.value, ast.Name):
                    containers.add(v.value.id)
    return names, containers


def _bound_once(method) -> set[str]:
    """Names bound at most once in ``method`` (a stored name is then the returned object)."""
    counts: dict[str, int] = {}
    for node in walk_shallow(method.node):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            counts[node.id] = counts.get(node.id, 0) + 1
        elif isinstance(node, ast.arg):
            counts[node.arg] = counts.get(node.arg, 0) + 1
    return {name for name, n in counts.items() if n <= 1}


def _max_calls(body: list[ast.stmt], is_call) -> tuple[int, list[ast.AST]]:
    """Most save calls on one path through ``body``, and the calls along that path."""
    best, _ = _paths(body, is_call)
    return best


def _paths(body: list[ast.stmt], is_call):
    """(best path that ends here or returns, best path that continues after ``body``).

    A branch that returns or raises ends its path: its calls are not added to the
    statements after the ``if`` (``if a: save(x); return`` then ``save(y)`` is one call).
    """
    ended: tuple[int, list] = (0, [])
    total, along = 0, []
    for stmt in body:
        if isinstance(stmt, ast.If):
            results = [_paths(stmt.body, is_call), _paths(stmt.orelse, is_call)]
            for done, _go in results:
                if done[0] and total + done[0] > ended[0]:
                    ended = (total + done[0], along + done[1])
            going = [go for (_d, go), block in zip(results, (stmt.body, stmt.orelse))
                     if not terminates(block)]
            step = max(going, key=lambda g: g[0]) if going else (0, [])
            if not going:
                return max(ended, (total, along), key=lambda g: g[0]), None
        elif isinstance(stmt, (ast.For, ast.While, ast.AsyncFor)):
            n, calls = _max_calls(stmt.body, is_call)
            step = (2 * n, calls * 2) if n else (0, [])
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            step = _max_calls(stmt.body, is_call)
        elif isinstance(stmt, ast.Try):
            step = _max_calls(stmt.body + stmt.orelse + stmt.finalbody, is_call)
        else:
            calls = [n for n in statement_nodes(stmt) if is_call(n)]
            step = (len(calls), calls)
        total += step[0]
        along = along + step[1]
        if isinstance(stmt, (ast.Return, ast.Raise)):
            return max(ended, (total, along), key=lambda g: g[0]), None
    return max(ended, (total, along), key=lambda g: g[0]), (total, along)


@checker(GS104, GS234, GS213, GS205, GS105, GS228, GS106, GS107)
def check_ctx_storage(facts: Facts, report) -> None:
    freed = released_attrs(facts)
    if _legacy_instance(facts.fc):
        report = _without_cycles(report)
    for method in own(facts, *CTX_METHODS):
        outputs = _Outputs(method, facts) if method.name == "forward" else None
        src = method.source

        def visit(stmt, flow: Flow, src=src, outputs=outputs, method=method, freed=freed):
            if isinstance(stmt, ast.Assign):
                for target in stmt.targets:
                    pairs = [(target, stmt.value)]
                    if isinstance(target, ast.Tuple) and isinstance(stmt.value, ast.Tuple) \
                            and len(target.elts) == len(stmt.value.elts):
                        pairs = list(zip(target.elts, stmt.value.elts))
                    for tgt, value in pairs:
                        if isinstance(tgt, ast.Attribute) and isinstance(tgt.value, ast.Name) \
                                and tgt.value.id == flow.ctx:
                            _ctx_attr(report, src, flow, tgt, value, outputs, method,
                                      released(value, freed.get(tgt.attr)))
            for node in statement_nodes(stmt):
                if is_ctx_call(node, flow.ctx, "save_for_backward"):
                    for arg in node.args:
                        _saved_arg(report, src, flow, arg, facts, method)
                elif attr_of(node, flow.ctx, "saved_tensors", "saved_variables") and isinstance(
                    node.ctx, ast.Load
                ):
                    report("GS107", src, node, f"`{short(src.segment(node))}` in {method.name}")

        facts.walk(method, visit)
        ctx = facts.ctx_of(method)
        count, calls = _max_calls(
            method.node.body, lambda n, ctx=ctx: is_ctx_call(n, ctx, "save_for_backward")
        )
        if count >= 2 and calls:
            report("GS106", src, calls[-1], f"{count} calls on one path")


def _legacy_instance(fc) -> bool:
    """A legacy Function with instance state: forward is a plain method and the class
    defines ``__init__``. Since torch 1.5 calling an instance raises RuntimeError (legacy
    autograd function with non-static forward) and ``Fn.apply`` hands ctx to ``self``
    without that state, so its ``self.out = out`` is never a ctx reference cycle."""
    fwd = fc.methods.get("forward")
    return fwd is not None and "forward" in fc.own and not fwd.static \
        and not fwd.classmethod and any(
            isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == "__init__"
            for s in fc.node.body)


def _without_cycles(report):
    """``report`` less the reference-cycle findings (GS104, GS234)."""
    def filtered(code, *args, **kwargs):
        if code not in ("GS104", "GS234"):
            report(code, *args, **kwargs)
    return filtered


class _Outputs:
    """What forward returns: names bound once and returned, containers of returned items."""

    def __init__(self, method, facts: Facts) -> None:
        names, self.containers = _output_names(method)
        once = _bound_once(method)
        self.names = names & once
        self.containers &= once
        self.evidence = evidence(method, sorted(self.names | self.containers),
                                 facts.ctx_of(method), facts.resolver(method), returned=False)
        # a marked output has no grad_fn, so keeping it on ctx makes no cycle
        self.names -= non_differentiable(method, facts.ctx_of(method))


def _parts(value: ast.expr, flow: Flow) -> list[tuple[ast.expr | None, Val]]:
    """The value stored, or each element of a tuple/list display or known tuple."""
    if isinstance(value, (ast.Tuple, ast.List)):
        return [(e, flow.eval(e)) for e in value.elts if not isinstance(e, ast.Starred)]
    val = flow.eval(value)
    if val.elements is not None:
        return [(None, e) for e in val.elements]
    return [(value, val)]


def _ctx_attr(report, src, flow: Flow, target, value, outputs, method, freed: bool) -> None:
    name = f"ctx.{target.attr}"
    found = None
    for expr, val in _parts(value, flow):
        ident = expr.id if isinstance(expr, ast.Name) else None
        tensor = val.tensor is True or (
            outputs is not None and ident is not None and outputs.evidence.get(ident) is True)
        if outputs is not None and ident in outputs.containers and val.tensor is not False:
            found = ("GS104", f"`{name}` holds `{ident}`, whose items are returned")
        elif "output" in val.origins and val.tensor:
            found = ("GS104", f"`{name}` holds the output")
        elif outputs is not None and ident in outputs.names and tensor:
            found = ("GS104", f"`{name}` holds the returned `{ident}`")
        if found and found[0] == "GS104":
            break
        inputs = sorted(o[6:] for o in val.origins if o.startswith("input:") and o != "input:*")
        if inputs and val.tensor and not found and not all(
                integer_tensor(method, n) for n in inputs):
            found = ("GS213", f"`{name}` holds input `{', '.join(inputs)}`")
        elif val.tensor and not val.origins and not found and expr is value:
            found = ("GS205", f"`{name} = {short(src.segment(value))}`")
    if found:  # a cycle backward breaks leaks only for a graph never differentiated
        code = "GS234" if found[0] == "GS104" and freed else found[0]
        report(code, src, target, found[1])


def _saved_arg(report, src, flow: Flow, arg, facts: Facts, method) -> None:
    if isinstance(arg, ast.Starred):
        return
    if isinstance(arg, ast.Constant):
        if arg.value is not None:
            report("GS105", src, arg, f"literal `{short(src.segment(arg))}`")
        return
    val = flow.eval(arg)
    if val.none:  # a name bound to None on every path: saved and given back as None
        return
    if val.tensor is False and "saved" not in val.origins:
        if _named_only(arg, val, facts, method):
            report("GS228", src, arg, f"`{arg.id}`")
        else:
            report("GS105", src, arg, f"`{short(src.segment(arg))}` is not a tensor")
    elif val.tensor is None and isinstance(arg, ast.Name) and method.name == "forward" \
            and val.origins == {f"input:{arg.id}"}:
        why = maybe_number(method.node, arg.id)
        if why:
            report("GS228", src, arg, f"`{arg.id}` ({why})")


def _named_only(arg, val, facts: Facts, method) -> bool:
    """Whether the only sign that forward input ``arg`` is not a tensor is its name
    (``groups``, ``dim``): callers may pass a tensor, so that is no evidence of a TypeError."""
    if not isinstance(arg, ast.Name) or val.origins != {f"input:{arg.id}"} \
            or method.name != "forward":
        return False
    found = evidence(method, [arg.id], facts.ctx_of(method), facts.resolver(method),
                     passed=facts.passed_tensors, by_name=False)
    return found[arg.id] is not False
