"""GS239, GS240: backward reads an attribute of a name that holds a tuple, or None."""

from __future__ import annotations

import ast

from gradsmith.linter._facts import Facts
from gradsmith.linter._kernels import finder
from gradsmith.linter._registry import Rule, checker
from gradsmith.linter.rules._common import own
from gradsmith.linter.rules._direct import is_none
from gradsmith.linter.rules._maybe_none import needed_only, stored_names
from gradsmith.linter.rules._saved_if_needed import saved_if_needed

_H = "import torch\n\n\nclass Scale(torch.autograd.Function):\n    @staticmethod\n" \
     "    def forward(ctx, *xs):\n        return tuple(x * 2 for x in xs)\n\n" \
     "    @staticmethod\n"
GS239 = Rule(
    "GS239", "tuple-used-as-tensor", "warning",
    "backward reads a tensor attribute or method (`.shape`, `.view`, `.scatter_add_`) of a "
    "name that holds a tuple",
    "`backward(ctx, *grads)` receives a tuple, and `name = tuple(...)` builds one: a tuple "
    "has no `.shape` or tensor methods, so that line raises AttributeError whenever it runs "
    "(often a branch only some arguments reach, e.g. one reduce mode of several, so the "
    "Function works in tests that take the other branches).",
    "index the tuple first (`grads[0].shape`), or loop over its items.",
    bad=_H + "    def backward(ctx, *grads):\n"
    "        out = torch.zeros(grads.shape)  # GS239\n        return tuple(g * 2 for g in grads)\n",
    good=_H + "    def backward(ctx, *grads):\n"
    "        out = torch.zeros(grads[0].shape)\n        return tuple(g * 2 for g in grads)\n",
    brief="tensor attribute of a tuple: AttributeError",
)
_H0 = "import torch\n\n\nclass Smooth(torch.autograd.Function):\n    @staticmethod\n" \
      "    def forward(ctx, q, smooth=False):\n        ctx.smooth = smooth\n" \
      "        ctx.save_for_backward(q)\n        return q * 2\n\n    @staticmethod\n" \
      "    def backward(ctx, g):\n        (q,) = ctx.saved_tensors\n        q_m = None\n" \
      "        if ctx.smooth:\n"
GS240 = Rule(
    "GS240", "none-dereferenced", "warning",
    "backward reads an attribute of a name it has just set to None, or set only when an "
    "input needs a gradient",
    "`q_m = None` and then, with no assignment in between, `q_m.repeat_interleave(...)`: "
    "the line raises AttributeError ('NoneType' object has no attribute) whenever it runs, "
    "typically on the branch of an option forward accepts but no test sets (the code "
    "that computed the value was commented out). Likewise `dw = None`, `if "
    "ctx.needs_input_grad[1]: dw = ...` and then `dw.to(w.dtype)` with no test of `dw`: it "
    "raises whenever that input needs no gradient (a frozen weight) and another one does; "
    "so does handing such a `dw` to a linted helper whose first lines read an attribute of "
    "it (`n, k = dw.shape`) before any test of it, and reading a tensor forward saved "
    "only when an input needs a gradient (`save_for_backward(x if ctx.needs_input_grad[1] "
    "else None)`, or a ctx flag set from `w.requires_grad`) outside a test of that need. "
    "In forward, `dx = ... if needs_grad else None` then `dx /= n` (TypeError) fails "
    "whenever no input requires grad (inference on frozen or detached tensors).",
    "compute the value on that branch before using it, or raise a clear error for the "
    "unsupported option.",
    bad=_H0 + "            q_m = q_m.mean(0)  # GS240\n            return g * 2 - q_m, None\n"
    "        return g * 2, None\n",
    good=_H0 + "            q_m = q.mean(0)\n            return g * 2 - q_m, None\n"
    "        return g * 2, None\n",
    brief="attribute of None: AttributeError",
)
_TUPLE_ATTRS = frozenset({"count", "index"})


@checker(GS239)
def check_tuple_as_tensor(facts: Facts, report) -> None:
    for method in own(facts, "backward"):
        star = method.node.args.vararg
        tuples = frozenset({star.arg}) if star is not None else frozenset()

        def found(node: ast.Attribute, method=method) -> None:
            report("GS239", method.source, node,
                   f"`{node.value.id}.{node.attr}`: `{node.value.id}` is a tuple")

        _visit(method.node.body, tuples, found, set(), _is_tuple, _TUPLE_ATTRS)


@checker(GS240)
def check_none_dereferenced(facts: Facts, report) -> None:
    find = finder(facts.sym_of[id(facts.fc.source)], facts.sym_of)
    slots, flags = saved_if_needed(facts)
    for method in own(facts, "backward"):
        def found(node: ast.Attribute, method=method) -> None:
            report("GS240", method.source, node,
                   f"`{node.value.id}.{node.attr}`: `{node.value.id}` is None here")

        _visit(method.node.body, frozenset(), found, set(), is_none, frozenset())
        needed_only(method, report, find, (slots, flags), facts.ctx_of(method))
    for method in own(facts, "forward"):  # `dx = ... if needs_grad else None; dx /= n`
        needed_only(method, report, find, ({}, flags), facts.ctx_of(method))


def _visit(body: list[ast.stmt], tuples: frozenset[str], found, seen: set[str], binds,
           allowed: frozenset[str]) -> None:
    """Walk ``body`` knowing which names hold a value ``binds`` recognises (a tuple, None),
    calling ``found`` at the first attribute of one outside ``allowed``. A block whose
    test mentions the name (``if x is not None:``) does not count on it."""
    for stmt in body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        blocks = [getattr(stmt, n, None) for n in ("body", "orelse", "finalbody")]
        blocks += [h.body for h in getattr(stmt, "handlers", ())]
        blocks = [b for b in blocks if isinstance(b, list) and b]
        if blocks:
            mentioned: set[str] = set()
            for field in ("test", "iter", "items"):
                part = getattr(stmt, field, None)
                for sub in part if isinstance(part, list) else [part] if part else []:
                    _uses(sub, tuples, found, seen, allowed)
                    mentioned |= {n.id for n in ast.walk(sub) if isinstance(n, ast.Name)}
            inner = tuples - stored_names(stmt) if isinstance(stmt, (ast.For, ast.While)) else tuples
            for block in blocks:
                _visit(block, inner - mentioned, found, seen, binds, allowed)
            tuples = tuples - stored_names(stmt)
            continue
        _uses(stmt, tuples, found, seen, allowed)
        tuples = tuples - stored_names(stmt)
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(
                stmt.targets[0], ast.Name) and binds(stmt.value):
            tuples = tuples | {stmt.targets[0].id}


def _uses(node: ast.AST, tuples: frozenset[str], found, seen: set[str],
          allowed: frozenset[str]) -> None:
    if not tuples:
        return
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) \
                and sub.value.id in tuples and sub.attr not in allowed \
                and not sub.attr.startswith("__") and sub.value.id not in seen:
            seen.add(sub.value.id)
            found(sub)


def _is_tuple(value: ast.expr) -> bool:
    """``tuple(...)`` or a tuple display of two or more items (``(a,)`` is kept out:
    too often a parenthesised one-item expression written with a comma by mistake)."""
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
        return value.func.id == "tuple"
    return isinstance(value, ast.Tuple) and len(value.elts) >= 2 and not any(
        isinstance(e, ast.Starred) for e in value.elts)



__all__ = ["GS239", "GS240"]
