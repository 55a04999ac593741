"""GS222, second reading: backward builds a gradient from values forward computed (and did not
return) and reads no input that gets a gradient, so the result has no graph back to them.

``grad = (onehot(labels) + exp(log_probs)) * grad_output`` with ``log_probs`` computed in
forward and ``labels`` an input whose gradient is None: under ``create_graph=True`` the
gradient is a constant with respect to the logits, and the second derivative is silently
zero instead of an error.
"""

from __future__ import annotations

import ast

from gradsmith.linter._facts import Facts
from gradsmith.linter._flow import walk_shallow
from gradsmith.linter.rules._fallthrough import _items


def forward_values_only(facts: Facts, bwd, ctx: str | None, slots: set[int],
                        value_names) -> ast.expr | None:
    """The first returned gradient (for an input that gets one) computed from a saved slot
    in ``slots`` while backward reads nothing tied to an input that gets a gradient.

    ``value_names(expr)``: the names whose values ``expr`` reads (not through ``.shape`` or
    ``empty_like``: a buffer shaped like a saved value holds none of its values)."""
    if not slots or facts.inputs is None or len(facts.saves) != 1:
        return None
    params, none, attrs = facts.inputs[0], facts.none_gradients, tied_attributes(facts)
    saved = facts.saves[0].args
    if any(isinstance(a, ast.Starred) for a in saved):
        return None
    # saved slots that tie backward to an input with a gradient (or to anything unknown)
    tied = {i for i, a in enumerate(saved) if i not in slots and not (
        isinstance(a, ast.Name) and a.id in none)}
    sources: dict[str, set[str]] = {}  # backward local -> "fwd" / "tied" it derives from
    for stmt in sorted((n for n in walk_shallow(bwd.node) if isinstance(n, ast.Assign)),
                       key=lambda n: (n.lineno, n.col_offset)):
        value = stmt.value
        unpack = isinstance(value, ast.Attribute) and value.attr == "saved_tensors" \
            and isinstance(value.value, ast.Name) and value.value.id == ctx
        for target in stmt.targets:
            if unpack:
                if not isinstance(target, (ast.Tuple, ast.List)) or len(target.elts) != len(saved):
                    return None
                for i, elt in enumerate(target.elts):
                    if isinstance(elt, ast.Name):
                        sources[elt.id] = {"saved"} if i in slots else (
                            {"tied"} if i in tied else set())
                continue
            got = _sources(value, sources, ctx, params, none, attrs, value_names)
            base = target.value if isinstance(target, ast.Subscript) else target
            for t in ast.walk(base):
                if isinstance(t, ast.Name):
                    old = sources.get(t.id, set()) if isinstance(target, ast.Subscript) else set()
                    sources[t.id] = old | got
    for ret in (n for n in walk_shallow(bwd.node) if isinstance(n, ast.Return)):
        items = _items(ret.value)
        if items is None:
            items = [ret.value] if len(params) == 1 and ret.value is not None else []
        for i, item in enumerate(items):
            if i < len(params) and params[i] not in none and not (
                    isinstance(item, ast.Constant) and item.value is None):
                got = _sources(item, sources, ctx, params, none, attrs, value_names)
                if got == {"fwd"}:
                    return item
    return None


def _sources(expr: ast.expr, sources: dict[str, set[str]], ctx, params, none,
             tied_attrs: set[str], value_names) -> set[str]:
    """What ``expr`` derives from: ``fwd`` (a forward-computed saved value), ``tied`` (an
    input with a gradient, or something unknown that may hold one)."""
    out: set[str] = set()
    # a saved forward value counts where arithmetic uses it (`exp(lp) - onehot`), not where it
    # only gives structure (`NestedTensor(g, offsets=offsets)`, a linear map of grad_output)
    arith: set[str] = set()
    for b in ast.walk(expr):
        if isinstance(b, ast.BinOp):
            _operands(b.left, arith)
            _operands(b.right, arith)
        elif isinstance(b, ast.UnaryOp):
            _operands(b.operand, arith)
    for name in value_names(expr):
        if name in sources:
            got = sources[name]
            out |= (got - {"saved"}) | ({"fwd"} if "saved" in got and name in arith else set())
        elif name in params and name not in none:
            out.add("tied")
    for node in ast.walk(expr):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id == ctx and node.attr in tied_attrs:
            out.add("tied")
    return out


#: Smooth functions: their result's derivative depends on the argument's value.
_SMOOTH = frozenset("""exp log log1p expm1 sigmoid tanh softmax log_softmax sqrt rsqrt pow
    reciprocal square matmul mm bmm einsum sin cos erf softplus""".split())


def _operands(node: ast.expr, out: set[str]) -> None:
    """Names that arithmetic uses as values: operands, and arguments of smooth functions
    (not a mask or index handed to ``masked_fill``/``gather``)."""
    if isinstance(node, ast.Name):
        out.add(node.id)
    elif isinstance(node, ast.BinOp):
        _operands(node.left, out)
        _operands(node.right, out)
    elif isinstance(node, ast.UnaryOp):
        _operands(node.operand, out)
    elif isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name in _SMOOTH:
            for arg in node.args:
                _operands(arg, out)
            if isinstance(func, ast.Attribute):
                _operands(func.value, out)


def tied_attributes(facts: Facts) -> set[str]:
    """ctx attributes forward sets to an input that gets a gradient, or to a view of one
    (other values computed in forward have no graph back to the inputs either)."""
    forward, inputs = facts.method("forward"), facts.inputs
    if forward is None or inputs is None:
        return set()
    ctx, live = facts.ctx_of(forward), set(inputs[0]) - facts.none_gradients
    out = set()
    for node in walk_shallow(forward.node):
        if isinstance(node, ast.Assign):
            value = node.value
            while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) \
                    and value.func.attr in _VIEWS:
                value = value.func.value
            if isinstance(value, (ast.Name, ast.Tuple, ast.List)) and any(
                    isinstance(n, ast.Name) and n.id in live for n in ast.walk(value)):
                out |= {t.attr for t in node.targets if isinstance(t, ast.Attribute)
                        and isinstance(t.value, ast.Name) and t.value.id == ctx}
    return out


_VIEWS = frozenset("""view view_as reshape contiguous to float double half bfloat16 squeeze
    unsqueeze flatten expand transpose t permute detach""".split())
