"""GS111-GS114: how a Function is declared and called."""

from __future__ import annotations

import ast
import re
from bisect import bisect_right
from collections import Counter

from gradsmith.linter._discovery import METHODS
from gradsmith.linter._facts import Facts, is_ctx_call
from gradsmith.linter._finding import Edit
from gradsmith.linter._flow import walk_shallow
from gradsmith.linter._registry import Rule, checker
from gradsmith.linter._symbols import statements
from gradsmith.linter._walk import header_exprs
from gradsmith.linter.rules._common import short
from gradsmith.linter.rules._direct import (
    GS224,
    apply_keyword_problem,
    backward_given_ctx,
    check_apply_count,
    given_ctx,
    gradless,
    is_none,
    unguarded_ctx_use,
)
from gradsmith.linter.rules._legacy import legacy_state

_H = "import torch\n\n\nclass Fn(torch.autograd.Function):\n"
_FN = (_H + "    @staticmethod\n    def forward(ctx, x):\n        return x * 2\n\n"
       "    @staticmethod\n    def backward(ctx, g):\n        return g * 2\n\n\n")
GS111 = Rule(
    "GS111", "direct-call", "error",
    "A Function is called directly (`Fn()(x)`, `Fn(x)` or `Fn.forward(...)`), not via "
    "`Fn.apply(x)`",
    "`Fn()(x)` is the removed legacy API and raises; `Fn(x)` builds a Function object instead "
    "of a tensor; `Fn.forward` runs without recording a graph node, so backward is never used; "
    "`Fn.forward(None, ...)` raises AttributeError when forward uses ctx; `Fn.forward(x)` "
    "without a ctx shifts every argument by one. (`Fn.forward(None, ...)` with a forward "
    "that tolerates a None ctx, or `Fn.forward(ctx, ...)` given a ctx of its own (a stand-in "
    "object in a unit test of forward alone, the class on a debug path: one argument more "
    "than forward's inputs), is a deliberate graph-less call that runs as written: not "
    "reported under `torch.no_grad()` or on detached inputs, elsewhere GS214. "
    "`Fn.backward(None, g)` or `Fn.backward(ctx, g)`, a test of the gradient formula alone, "
    "computes what backward returns: reported only when backward uses a None ctx.)",
    "call `Fn.apply(x)`. The automatic fix rewrites only `Fn()(x)` and `Fn.forward(x)`; "
    "`Fn()` alone (a class used as a namespace) is not reported.",
    bad=_FN + "y = Fn()(torch.ones(2))  # GS111\n",
    good=_FN + "y = Fn.apply(torch.ones(2))\n",
    autofix=True, scope="module",
    brief="Function called directly, not via .apply",
)
_KW = (_H + "    @staticmethod\n    def forward(ctx, x, k=2.0, shift=0.0):\n        ctx.k = k\n"
       "        return x * k + shift\n\n"
       "    @staticmethod\n    def backward(ctx, g):\n        return g * ctx.k, None, None\n\n\n")
GS112 = Rule(
    "GS112", "apply-keywords", "error",
    "Function.apply is called with keyword arguments it cannot bind",
    "apply binds a keyword only to a positional parameter of forward with that name, "
    "after the positional arguments (checked on torch 2.13: `Fn.apply(x, 2.0, shift=1.0)` "
    "runs and differentiates). It raises TypeError when a keyword names no such parameter "
    "(keyword-only parameters and `**kwargs` included), repeats one given by position, or "
    "leaves a parameter before it unfilled: with a ctx forward even one that has a default "
    "(`Fn.apply(x, shift=1.0)`: missing required argument 'k'); with setup_context the "
    "defaults fill the gap. Keywords that bind are not reported.",
    "pass the skipped parameters too (positionally or by name), drop keywords forward "
    "does not declare, or wrap apply in a function with keywords.",
    bad=_KW + "y = Fn.apply(torch.ones(2), shift=1.0)  # GS112\n",
    good=_KW + "y = Fn.apply(torch.ones(2), 2.0, shift=1.0)\n",
    scope="module",
    brief="keyword arguments to .apply that raise TypeError",
)
GS121 = Rule(
    "GS121", "apply-count", "error",
    "Function.apply is called with a number of arguments that forward cannot take",
    "apply passes its arguments to forward unchanged: too many or too few raise TypeError "
    "when the line runs.",
    "pass exactly the arguments forward declares (ctx excluded), in order.",
    bad=_H + "    @staticmethod\n    def forward(ctx, x, k):\n        ctx.k = k\n        return x * k\n\n"
    "    @staticmethod\n    def backward(ctx, g):\n        return g * ctx.k, None\n\n\n"
    "y = Fn.apply(torch.ones(2))  # GS121\n",
    good=_H + "    @staticmethod\n    def forward(ctx, x, k):\n        ctx.k = k\n        return x * k\n\n"
    "    @staticmethod\n    def backward(ctx, g):\n        return g * ctx.k, None\n\n\n"
    "y = Fn.apply(torch.ones(2), 3.0)\n",
    scope="module",
    brief="apply argument count does not fit forward (TypeError)",
)
GS214 = Rule(
    "GS214", "forward-called-without-ctx", "warning",
    "`Fn.forward(None, ...)` (or with a stand-in ctx) is called where a gradient may be "
    "needed",
    "Passing None (or an object of its own) as ctx runs forward on purpose without a graph "
    "node: outside "
    "`torch.no_grad()` autograd differentiates forward's own operations (or nothing, for a "
    "custom kernel) and the Function's backward is never used.",
    "call `Fn.apply(...)`, or run the call under `torch.no_grad()` / on detached inputs "
    "when no gradient is wanted (then nothing is reported).",
    bad=_FN + "y = Fn.forward(None, torch.ones(2, requires_grad=True))  # GS214\n",
    good=_FN + "with torch.no_grad():\n    y = Fn.forward(None, torch.ones(2))\n",
    scope="module",
    brief="forward called with its own ctx outside no_grad: backward is bypassed",
)
GS113 = Rule(
    "GS113", "not-staticmethod", "warning",
    "forward/backward/setup_context/jvp/vmap is not a @staticmethod",
    "PyTorch calls these on the class with ctx as the first argument, so a plain `def` "
    "still runs correctly (checked on torch 2.13: eager, gradcheck and torch.compile); it is "
    "the legacy style, reads like an instance method, and tools that bind it to an instance "
    "(or a future PyTorch) would shift every argument by one.",
    "decorate it with `@staticmethod` (outermost decorator).",
    bad=_H + "    def forward(ctx, x):  # GS113\n        return x * 2\n\n"
    "    @staticmethod\n    def backward(ctx, g):\n        return g * 2\n",
    good=_H + "    @staticmethod\n    def forward(ctx, x):\n        return x * 2\n\n"
    "    @staticmethod\n    def backward(ctx, g):\n        return g * 2\n",
    autofix=True,
    brief="not a @staticmethod (runs, but legacy style)",
)
GS117 = Rule(
    "GS117", "self-before-ctx", "error",
    "forward/backward takes `self` before `ctx` without being a @staticmethod",
    "PyTorch calls these on the class as `forward(ctx, *inputs)`: `self` receives ctx, "
    "`ctx` the first input, and every argument shifts by one, so the call raises TypeError "
    "(a missing argument) or runs on the wrong values.",
    "drop `self` and decorate the method with `@staticmethod`.",
    bad=_H + "    def forward(self, ctx, x):  # GS117\n        return x * 2\n\n"
    "    @staticmethod\n    def backward(ctx, g):\n        return g * 2\n",
    good=_H + "    @staticmethod\n    def forward(ctx, x):\n        return x * 2\n\n"
    "    @staticmethod\n    def backward(ctx, g):\n        return g * 2\n",
    brief="`self` before `ctx`: arguments shift by one (TypeError or wrong values)",
)
GS114 = Rule(
    "GS114", "forward-ctx-with-setup-context", "error",
    "forward takes ctx although the Function defines setup_context",
    "With setup_context, forward receives only the inputs; its first input is silently "
    "treated as ctx (or apply fails with a count error).",
    "drop ctx from forward and do all ctx work in setup_context.",
    bad=_H + "    @staticmethod\n    def forward(ctx, x):  # GS114\n        return x * 2\n\n"
    "    @staticmethod\n    def setup_context(ctx, inputs, output):\n        pass\n\n"
    "    @staticmethod\n    def backward(ctx, g):\n        return g * 2\n",
    good=_H + "    @staticmethod\n    def forward(x):\n        return x * 2\n\n"
    "    @staticmethod\n    def setup_context(ctx, inputs, output):\n        pass\n\n"
    "    @staticmethod\n    def backward(ctx, g):\n        return g * 2\n",
    brief="forward takes ctx beside setup_context",
)

_CTX_USES = ("save_for_backward", "mark_dirty", "mark_non_differentiable", "set_materialize_grads",
             "save_for_forward")


@checker(GS113, GS117, GS114)
def check_declaration(facts: Facts, report) -> None:
    fc = facts.fc
    # a legacy Function with state (GS126) cannot run at all: @staticmethod alone is no fix
    for stmt in [] if legacy_state(fc) else fc.node.body:
        if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) or stmt.name not in METHODS:
            continue
        method = fc.methods.get(stmt.name)
        if method is None or method.node is not stmt or method.static or method.classmethod:
            continue  # PyTorch binds cls for a classmethod and passes ctx after it
        params = [a.arg for a in (*stmt.args.posonlyargs, *stmt.args.args)]
        if len(params) > 1 and params[1] in ("ctx", "context"):
            report("GS117", method.source, stmt, f"`{stmt.name}({params[0]}, {params[1]}, ...)`")
            continue
        fix = ()
        src = method.source
        anchor = stmt.decorator_list[0] if stmt.decorator_list else stmt
        line = anchor.lineno
        indent = src.lines[stmt.lineno - 1][: src.char_col(stmt.lineno, stmt.col_offset)]
        if indent.strip() == "":
            fix = (Edit((line, 0), (line, 0), f"{indent}@staticmethod\n"),)
        report("GS113", method.source, stmt, f"`{stmt.name}`", fix)
    fwd = fc.methods.get("forward")
    if fc.setup_style and fwd is not None and "forward" in fc.own and fwd.params:
        first = fwd.params[0]
        used = any(
            is_ctx_call(n, first, u) for n in walk_shallow(fwd.node) for u in _CTX_USES
        ) or any(
            isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)
            and isinstance(n.value, ast.Name) and n.value.id == first
            for n in walk_shallow(fwd.node)
        )
        if first in ("ctx", "context") or used:
            report("GS114", fwd.source, fwd.node, f"first parameter `{first}`")


def _function_of(target, expr: ast.expr):
    """The discovered FunctionClass an expression names, or None."""
    if not isinstance(expr, (ast.Name, ast.Attribute)):
        return None
    found = target.index.resolve_base(target.sym, expr)
    if isinstance(found, tuple):
        return target.index.functions.get(id(found[1]))
    return None


@checker(GS111, GS112, GS121, GS214, GS224, scope="module")
def check_calls(target, report) -> None:
    src = target.source
    names = getattr(target.index, "names", set())
    words = set(_IDENT.findall(src.text))
    if not names & words:
        return  # no discovered Function is named in this file
    names = names | {
        local for local, qual in target.sym.imports.items() if qual.rpartition(".")[2] in names
    }
    spans = sorted(  # line spans of methods of Function classes: delegation is allowed there
        (stmt.lineno, stmt.end_lineno)
        for fc in target.index.functions.values() if fc.source is src
        for stmt in fc.node.body if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef))
    )
    starts = [a for a, _ in spans]
    hits = _lines_mentioning(src.text, names & words)
    legacy: set[int] = set()
    for node in _calls_on(src.tree, hits):
        if not isinstance(node, ast.Call) or id(node) in legacy:
            continue
        if isinstance(node.func, ast.Call) and _legacy_call(target, report, src, node):
            legacy.add(id(node.func))
            continue
        head = node.func.value if isinstance(node.func, ast.Attribute) else node.func
        key = head.attr if isinstance(head, ast.Attribute) else getattr(head, "id", None)
        if key in names or (isinstance(node.func, ast.Name) and node.func.id in names):
            at = bisect_right(starts, node.lineno) - 1
            inside = at >= 0 and spans[at][0] <= node.lineno <= spans[at][1]
            _check_call(target, report, src, node, inside or _hands_own_ctx(src.tree, node))


def _hands_own_ctx(tree: ast.Module, node: ast.Call) -> bool:
    """``Fn.forward(ctx, ...)`` inside a ``forward``/``backward``/``setup_context`` of any class
    (a plain class standing in for a Function) whose own first parameter is that ``ctx``: it
    hands its caller's ctx on, a delegation like one from a Function's own method."""
    func = node.func
    if not (isinstance(func, ast.Attribute) and func.attr in ("forward", "backward")
            and node.args and isinstance(node.args[0], ast.Name)):
        return False
    methods = tree.__dict__.get("_gs_ctx_methods")
    if methods is None:  # once per module
        methods = tree.__dict__["_gs_ctx_methods"] = [
            (n.lineno, n.end_lineno, (n.args.posonlyargs + n.args.args)[0].arg)
            for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            and n.name in ("forward", "backward", "setup_context")
            and n.args.posonlyargs + n.args.args]
    return any(start <= node.lineno <= end and node.args[0].id == ctx
               for start, end, ctx in methods)


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_LINES = re.compile(r"\r\n|\r|\n")


def _lines_mentioning(text: str, names: set[str]) -> set[int]:
    """Line numbers (1-based) where any of ``names`` occurs as an identifier (one pass)."""
    hits = set()
    for number, line in enumerate(_LINES.split(text), 1):
        if not names.isdisjoint(_IDENT.findall(line)):
            hits.add(number)
    return hits


def _calls_on(tree: ast.Module, hits: set[int]):
    """Nodes of the statements that touch one of the ``hits`` lines (cheaper than a full walk)."""
    for stmt in statements(tree.body):
        parts = header_exprs(stmt)
        if isinstance(stmt, ast.ClassDef):
            parts = [*stmt.bases, *stmt.keywords, *stmt.decorator_list]
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            parts = [*stmt.decorator_list, *stmt.args.defaults, *stmt.args.kw_defaults]
        for part in parts:
            if part is None:
                continue
            end = getattr(part, "end_lineno", None) or part.lineno
            if any(line in hits for line in range(part.lineno, end + 1)):
                yield from ast.walk(part)


def _unambiguous(target, fc) -> bool:
    """Whether ``fc`` is the only class of its name in its module (test files define a
    local ``MyFunc`` in many functions; resolution by name could pick the wrong one)."""
    sym = target.index.by_source.get(id(fc.source))
    if sym is None:
        return False
    counts = sym.__dict__.get("_gs_class_counts")
    if counts is None:  # once per module: a count per call made this quadratic in Functions
        counts = sym.__dict__["_gs_class_counts"] = Counter(c.name for c in sym.all_classes)
    return counts[fc.name] == 1


def _has_init(target, fc) -> bool:
    """Whether the Function (or a linted base) defines ``__init__`` (legacy, with state)."""
    for stmt in fc.node.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == "__init__":
            return True
    return fc.unknown_base


def _legacy_call(target, report, src, node: ast.Call) -> bool:
    """``Fn()(x)``: the removed legacy API. Safe fix to ``Fn.apply(x)`` when ``Fn()`` takes
    nothing and the class has no ``__init__`` (the rewrite then runs the same forward)."""
    inner = node.func
    fc = _function_of(target, inner.func)
    if fc is None:
        return False
    fix = ()
    if not inner.args and not inner.keywords and not _has_init(target, fc):
        fix = (Edit(src.start(inner), src.end(inner), f"{src.segment(inner.func)}.apply"),)
    report("GS111", src, node, f"`{short(src.segment(inner))}(...)`", fix)
    return True


def _check_call(target, report, src, node: ast.Call, in_method: bool) -> None:
    func = node.func
    fc = _function_of(target, func)
    if fc is not None:
        # `Fn()` alone builds an instance (used as a namespace): nothing certain to report.
        # `Fn(x)` without an __init__ builds a useless instance instead of a tensor: an
        # error, but rewriting it would change what runs, so there is no automatic fix.
        if (node.args or node.keywords) and not _has_init(target, fc):
            report("GS111", src, node, f"`{short(src.segment(func))}(...)` builds an instance")
        return
    if not isinstance(func, ast.Attribute) or func.attr not in ("apply", "forward", "backward"):
        return
    fc = _function_of(target, func.value)
    if fc is None:
        return
    if func.attr == "apply":
        problem = apply_keyword_problem(node, fc)  # keywords that bind are fine
        if problem:
            report("GS112", src, node, problem)
        if _unambiguous(target, fc):
            check_apply_count(report, src, node, fc)
        return
    if in_method:
        return  # delegating to a base Function's forward/backward from inside a Function
    if func.attr == "forward" and node.args and (is_none(node.args[0]) or given_ctx(node, fc)):
        # `Fn.forward(None, ...)` or with a stand-in ctx: run on purpose without a graph
        # node. Fine where no gradient can be needed; elsewhere gradients bypass backward.
        used = unguarded_ctx_use(fc) if is_none(node.args[0]) else None
        if used:
            report("GS111", src, node, f"ctx is None but forward uses `{used}` (AttributeError)")
        elif not gradless(src, node):
            first = "None" if is_none(node.args[0]) else short(src.segment(node.args[0]), 16)
            report("GS214", src, node, f"`{short(src.segment(func))}({first}, ...)`")
        return
    if func.attr == "backward" and backward_given_ctx(node, fc):
        # The gradient formula called on its own (a unit test): it runs as written.
        used = unguarded_ctx_use(fc, "backward") if is_none(node.args[0]) else None
        if used:
            report("GS111", src, node, f"ctx is None but backward uses `{used}` (AttributeError)")
        return
    fix = ()
    inputs = fc.inputs()
    if func.attr == "forward" and inputs and not node.keywords and not inputs[2] and (
        len(node.args) == len(inputs[0]) and not any(isinstance(a, ast.Starred) for a in node.args)
    ):
        line, col = src.end(func)
        fix = (Edit((line, col - len("forward")), (line, col), "apply"),)
    report("GS111", src, node, f"`{short(src.segment(func))}(...)`", fix)
