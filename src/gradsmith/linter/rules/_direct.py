"""Calls of a Function that bypass or misuse ``apply`` (helpers of the GS111/GS121/GS214
checks): ``Fn.forward(None, ...)`` and where it is harmless, and apply's argument count."""

from __future__ import annotations

import ast

from gradsmith.linter._flow import walk_shallow
from gradsmith.linter._registry import Rule
from gradsmith.linter._symbols import statements
from gradsmith.linter.rules._common import short

_H = "import torch\n\n\nclass Fn(torch.autograd.Function):\n    @staticmethod\n"
GS224 = Rule(
    "GS224", "apply-spreads-sequence", "warning",
    "`Fn.apply(*xs, ...)` spreads a sequence into one parameter that forward treats as a "
    "sequence",
    "forward takes the sequence whole (`isinstance(xs, tuple)`, `for x in xs`, `len(xs)`), "
    "but `*` at the call site spreads its elements over forward's parameters: with one "
    "element forward gets that element, with more apply raises TypeError (too many "
    "arguments); how many the caller has decides which.",
    "pass the sequence itself (`Fn.apply(xs, ...)`, with tensors that need gradients as "
    "separate arguments), or give forward a `*xs` parameter.",
    bad=_H + "    def forward(ctx, inputs, scale):\n        inputs = inputs if isinstance(inputs, tuple) "
    "else (inputs,)\n        ctx.scale = scale\n        return inputs[0] * scale\n\n"
    "    @staticmethod\n    def backward(ctx, g):\n        return g * ctx.scale, None\n\n\n"
    "def run(*inputs):\n    return Fn.apply(*inputs, 2.0)  # GS224\n",
    good=_H + "    def forward(ctx, x, scale):\n        ctx.scale = scale\n        return x * scale\n\n"
    "    @staticmethod\n    def backward(ctx, g):\n        return g * ctx.scale, None\n\n\n"
    "def run(x):\n    return Fn.apply(x, 2.0)\n",
    scope="module",
    brief="apply spreads a sequence forward takes whole",
)


def unguarded_ctx_use(fc, name: str = "forward") -> str | None:
    """``ctx.<attr>`` that forward (or the method ``name``) reaches without testing ``ctx``
    first, else None."""
    fwd = fc.methods.get(name)
    if fwd is None or name == "forward" and fc.setup_style or not fwd.params:
        return None
    ctx = fwd.params[0]
    for stmt in fwd.node.body:
        if isinstance(stmt, (ast.If, ast.While, ast.Try, ast.With, ast.For)) or isinstance(
            stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        ):
            return None  # from here on, paths depend on tests we do not follow
        for node in walk_shallow(stmt):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.value.id == ctx:
                return f"{ctx}.{node.attr}"
            if isinstance(node, ast.IfExp):
                break
    return None


def is_none(expr: ast.expr) -> bool:
    return isinstance(expr, ast.Constant) and expr.value is None


def given_ctx(node: ast.Call, fc) -> bool:
    """Whether ``Fn.forward(...)`` passes a ctx of its own: one argument more than forward
    takes besides ctx (``Fn.forward(types.SimpleNamespace(), a, b)`` in a unit test of
    forward alone, ``Fn.forward(Fn, ...)`` on a debug path). Such a call runs as written;
    only one that leaves ctx out shifts every argument (TypeError or a tensor as ctx)."""
    inputs = fc.inputs()
    if inputs is None or inputs[2] or not node.args or any(
        isinstance(a, ast.Starred) for a in node.args
    ) or any(k.arg is None for k in node.keywords):
        return False
    params = inputs[0]
    named = sum(1 for k in node.keywords if k.arg in params)
    return len(node.args) + named == len(params) + 1


def backward_given_ctx(node: ast.Call, fc) -> bool:
    """Whether ``Fn.backward(...)`` passes a ctx: None, or one argument per parameter of
    backward, ctx included (a unit test of the gradient formula, ``Fn.backward(None, g)``).
    Such a call computes what backward returns, no graph is involved; only one that leaves
    ctx out shifts every argument."""
    method = fc.methods.get("backward")
    if method is None or not node.args or any(isinstance(a, ast.Starred) for a in node.args):
        return False
    if is_none(node.args[0]):
        return True
    return method.node.args.vararg is None and not node.keywords and \
        len(node.args) == len(method.params)


_NO_GRAD = ("no_grad", "inference_mode")


def _no_grad_expr(expr: ast.expr) -> bool:
    call = expr if isinstance(expr, ast.Call) else None
    head = call.func if call else expr
    name = head.attr if isinstance(head, ast.Attribute) else getattr(head, "id", None)
    if name in _NO_GRAD:
        return not (call and call.args and isinstance(call.args[0], ast.Constant)
                    and call.args[0].value is False)
    return name == "set_grad_enabled" and bool(call and call.args) and isinstance(
        call.args[0], ast.Constant) and call.args[0].value is False


def gradless(src, call: ast.Call) -> bool:
    """Whether ``call`` runs where no gradient can be needed: in a no-grad block or
    function, or on inputs that carry no autograd history (``.detach()``, ``.data``)."""
    spans = src.__dict__.get("_no_grad_spans")
    if spans is None:
        spans = []
        for stmt in statements(src.tree.body):
            if isinstance(stmt, (ast.With, ast.AsyncWith)) and any(
                _no_grad_expr(item.context_expr) for item in stmt.items
            ) or isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                _no_grad_expr(d) for d in stmt.decorator_list
            ):
                spans.append((stmt.lineno, stmt.end_lineno))
        src.__dict__["_no_grad_spans"] = spans
    if any(a <= call.lineno <= b for a, b in spans):
        return True
    rest = call.args[1:]
    return bool(rest) and all(
        isinstance(a, ast.Constant)
        or isinstance(a, ast.Attribute) and a.attr == "data"
        or isinstance(a, ast.Call) and isinstance(a.func, ast.Attribute) and a.func.attr == "detach"
        for a in rest
    )


def apply_keyword_problem(node: ast.Call, fc) -> str | None:
    """GS112: why ``Fn.apply(..., name=value)`` raises TypeError, or None where it binds.

    apply (torch 2.13) binds a keyword to forward's positional parameter of that name,
    after the positional arguments; every parameter between them and the last keyword
    must be given too (with a ctx forward even one with a default: "missing required
    argument"; with setup_context the defaults fill the gap). A keyword forward has no
    positional parameter of (keyword-only, ``**kwargs``) is always rejected. Where the
    call spreads ``*xs``/``**kw`` or forward is not linted, nothing is certain: None."""
    inputs = fc.inputs()
    explicit = [k.arg for k in node.keywords if k.arg is not None]
    if not explicit or inputs is None:
        return None
    params, ndefault, _ = inputs
    unknown = [k for k in explicit if k not in params]
    if unknown:
        return f"forward has no parameter {short(', '.join(unknown), 40)}"
    if any(isinstance(a, ast.Starred) for a in node.args) or len(explicit) < len(node.keywords):
        return None
    given = len(node.args)
    twice = [k for k in explicit if params.index(k) < given]
    if twice:
        return f"`{short(twice[0], 30)}` also given by position"
    last = max(params.index(k) for k in explicit)
    first_default = len(params) - ndefault
    for i, name in enumerate(params[given:], given):
        if name in explicit:
            continue
        if i < first_default or (i < last and not fc.setup_style):
            return f"`{short(name, 30)}` skipped before `{short(params[last], 30)}=`"
    return None


def check_apply_count(report, src, node: ast.Call, fc) -> None:
    """GS121: ``Fn.apply`` with more positional arguments than forward takes, or fewer
    than it requires (counted only when no ``*args``/``**kwargs`` hide the number; a
    ``*xs`` may be empty, so the arguments beside it still count against the most).
    GS224: a ``*xs`` that must fill exactly one parameter forward treats as a sequence."""
    inputs = fc.inputs()
    if inputs is None or fc.unknown_base or node.keywords:
        return
    params, ndefault, vararg = inputs
    stars = [i for i, a in enumerate(node.args) if isinstance(a, ast.Starred)]
    if stars:
        fixed = len(node.args) - len(stars)
        if fixed > len(params) and not vararg:
            report("GS121", src, node, f"{fixed} besides `*`, forward takes at most {len(params)}")
        elif len(stars) == 1 and not vararg and len(params) - fixed == 1 \
                and _sequence_param(fc, params[stars[0]]):
            star = node.args[stars[0]]
            report("GS224", src, node, f"`*{short(src.segment(star.value), 20)}` fills "
                   f"`{short(params[stars[0]], 20)}` alone: TypeError with 2+")
        return
    given, required = len(node.args), len(params) - ndefault
    if given < required:
        report("GS121", src, node, f"{given} argument(s), forward requires {required}")
    elif given > len(params) and not vararg:
        report("GS121", src, node, f"{given} argument(s), forward takes at most {len(params)}")


def _sequence_param(fc, name: str) -> bool:
    """Whether forward tests ``name`` for a tuple or list, iterates it, takes its ``len`` or
    unpacks it with ``*``: it expects the sequence a ``*`` at the call site spreads out."""
    fwd = fc.methods["forward"].node
    for node in ast.walk(fwd):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args and \
                isinstance(node.args[0], ast.Name) and node.args[0].id == name:
            if node.func.id == "len":
                return True
            if node.func.id == "isinstance" and len(node.args) == 2 and any(
                isinstance(t, ast.Name) and t.id in _SEQUENCES or isinstance(t, ast.Attribute)
                and t.attr in _SEQUENCES for t in ast.walk(node.args[1])
            ):
                return True
        iterated = node.iter if isinstance(node, (ast.For, ast.comprehension)) else \
            node.value if isinstance(node, ast.Starred) else None
        if isinstance(iterated, ast.Name) and iterated.id == name:
            return True
    return False


_SEQUENCES = frozenset({"tuple", "list", "Sequence", "Iterable"})
__all__ = ["GS224", "backward_given_ctx", "check_apply_count", "given_ctx", "gradless", "is_none",
           "unguarded_ctx_use"]
