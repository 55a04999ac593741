"""GS248: a wrong gradient count in a Function whose outputs a compiled extension fills in
place, in tensors made with ``x.new()`` from an input whose dtype the code does not show.

Whether backward ever runs depends on that dtype: integer outputs (indices, maps) never
require grad, so backward is never called; floating ones do, and the wrong count raises.
The code says neither, so the count is a warning, not an error (GS108/GS110 when an output
is shown floating, GS229 when every output is shown integer)."""

from __future__ import annotations

import ast
import re

from gradsmith.linter import _extensions
from gradsmith.linter._kernels import finder
from gradsmith.linter._registry import Rule
from gradsmith.linter.rules._latent import forward_outputs, int_inputs, integer

_H = ("import torch\nfrom mypkg import _C\n\n\nclass Fn(torch.autograd.Function):\n"
      "    @staticmethod\n    def forward(ctx, coords, batch_size):\n"
      "        out = coords.new()\n        _C.voxelize(coords, out, batch_size)\n"
      "        return out\n\n    @staticmethod\n    def backward(ctx, g):\n")
GS248 = Rule(
    "GS248", "gradient-count-if-floating", "warning",
    "backward's gradient count (returned or received) is wrong; forward's outputs are "
    "tensors a compiled extension fills in place, made with `x.new()` from an input whose "
    "dtype the code does not show (or integer tensors), and backward returns no gradient",
    "If an output is a floating tensor, a loss that uses it makes autograd call backward and "
    "the wrong count raises; if every output is an integer tensor (indices, a map, as a "
    "backward returning only None suggests), backward never runs. The dtype comes from the "
    "callers' input and the extension fills the tensor, so the code does not say which: a "
    "warning, not an error.",
    "return one value per forward input and take one gradient parameter per output "
    "(`return (None,) * n_inputs`); mark integer outputs with "
    "`ctx.mark_non_differentiable(...)`.",
    bad=_H + "        return None  # GS248\n",
    good=_H + "        return None, None\n",
    brief="wrong gradient count, fails only if an output is floating",
)

#: ``x.new()``, ``x.new_empty(n)``: a tensor of ``x``'s dtype unless a dtype is given.
_NEW = frozenset("new new_empty new_zeros new_ones new_full".split())
_FLOAT_CASTS = frozenset("float double half bfloat16".split())
_FLOAT_MAKERS = frozenset("randn rand randn_like rand_like linspace logspace".split())
_FLOAT_DTYPE = re.compile(r"\b(float(16|32|64)?|double|half|bfloat16)\b")


def count_if_floating(facts, forward) -> bool:
    """Every output of ``forward`` is an integer tensor or one of an input's dtype an
    extension fills in place (at least one such), nothing in forward asks for a gradient,
    and backward returns no gradient (only None): a wrong count fails only if that input
    is floating."""
    backward = facts.method("backward")
    if backward is None or facts.inputs is None or not _returns_no_gradient(backward.node):
        return False
    outputs, bound, unknown, known = forward_outputs(forward, facts.ctx_of(forward),
                                                     int_inputs(facts))
    params = facts.inputs[0]
    filled = None
    found = False
    for expr in outputs:
        if integer(expr, bound, unknown, known):
            continue
        if not isinstance(expr, ast.Name) or expr.id in unknown or len(
                bound.get(expr.id, ())) != 1:
            return False
        source = _new_of_input(bound[expr.id][0], params, bound, unknown)
        if source is None or _passed_floating(facts, params.index(source)):
            return False
        filled = _filled(facts, forward) if filled is None else filled
        if expr.id not in filled:
            return False
        found = True
    return found and not any(
        isinstance(n, ast.Attribute) and n.attr in ("requires_grad", "requires_grad_")
        or isinstance(n, ast.keyword) and n.arg == "requires_grad"
        for n in ast.walk(forward.node))


def _returns_no_gradient(node: ast.AST) -> bool:
    """Every ``return`` of backward gives None (alone or as each item of a tuple)."""
    returns = [n for n in ast.walk(node) if isinstance(n, ast.Return)]
    return bool(returns) and all(
        all(isinstance(e, ast.Constant) and e.value is None
            for e in (r.value.elts if isinstance(r.value, ast.Tuple) else [r.value]))
        for r in returns if r.value is not None)


def _new_of_input(value: ast.expr, params: list[str], bound, unknown) -> str | None:
    """The input ``x`` when ``value`` is ``x.new(...)`` (or ``new_empty``...) with no
    dtype, ``x`` a forward input forward never rebinds."""
    if not isinstance(value, ast.Call) or not isinstance(value.func, ast.Attribute) or \
            value.func.attr not in _NEW or any(k.arg == "dtype" for k in value.keywords):
        return None
    source = value.func.value
    if not isinstance(source, ast.Name) or source.id not in params or source.id in bound \
            or source.id in unknown:
        return None
    return source.id


def _passed_floating(facts, position: int) -> bool:
    """A linted call of ``Fn.apply`` passes a floating tensor at ``position``."""
    from gradsmith.linter._reuse import call_arguments

    return any(_floating(arg, func) for arg, func in call_arguments(
        facts.fc.node.name, position, facts.sym_of))


def _floating(arg: ast.expr, func, depth: int = 0) -> bool:
    """``arg`` (in the calling function ``func``) is shown floating: ``x.float()``,
    ``torch.randn(...)``, ``dtype=torch.float32``, or a name bound only to such."""
    if isinstance(arg, ast.Name) and func is not None and depth < 2:
        values = [n.value for n in ast.walk(func) if isinstance(n, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == arg.id for t in n.targets)]
        return bool(values) and all(_floating(v, func, depth + 1) for v in values)
    if not isinstance(arg, ast.Call):
        return False
    name = arg.func.attr if isinstance(arg.func, ast.Attribute) else getattr(arg.func, "id", "")
    return name in _FLOAT_CASTS and not arg.args or name in _FLOAT_MAKERS or any(
        k.arg == "dtype" and _FLOAT_DTYPE.search(ast.unparse(k.value)) for k in arg.keywords)


def _filled(facts, forward) -> frozenset[str]:
    """Names forward hands to a compiled extension's function (which fills them in place)."""
    from gradsmith.linter.rules._kernels import _Lazy, _opaque

    sym = facts.sym_of.get(id(forward.source))
    if sym is None:
        return frozenset()
    scope = _extensions.Scope(sym, facts.sym_of, _extensions.names(sym, facts.sym_of))
    scope = scope.with_locals(forward.node)
    local = _Lazy(forward.node, frozenset(scope.known))
    find = finder(sym, facts.sym_of)
    found: set[str] = set()
    for node in ast.walk(forward.node):
        if isinstance(node, ast.Call) and _opaque(node, find, local, scope):
            found.update(a.id for a in (*node.args, *(k.value for k in node.keywords))
                         if isinstance(a, ast.Name))
    return frozenset(found)


__all__ = ["GS248", "count_if_floating"]
