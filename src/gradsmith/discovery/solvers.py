"""Solver objects: arguments whose forward output must be an optimum (private).

Decision-focused learning and optimisation layers take an object holding an optimisation
model (``module.optmodel``) and have forward call its solver (``optmodel.setObj(c)``,
``optmodel.solve()``), often through several helpers. Their backward formulas (perturbation,
SPO+, Fenchel-Young) hold only when what ``solve`` returns is a true optimum, which no
invented stand-in can promise: a fake solver would make any backward look right or wrong
at random. So such a Function is skipped, with a reason that names the call the code makes
and a decorator to fill in with the user's own object. Read, never run: the argument is
followed through aliases (``optmodel = module.optmodel``) and into module-level helpers it
is passed to, a few calls deep.
"""

from __future__ import annotations

import ast
import inspect
from typing import Any

from gradsmith.discovery.source import parse as _parse

#: Method names that run an optimiser.
SOLVE_METHODS = {"solve", "optimize", "optimise", "minimize", "minimise", "argmin", "argmax",
                 "maximize", "maximise"}
_DEPTH = 10


def solver_arguments(owner: Any, names: list[str]) -> dict[str, str]:
    """Each argument of ``owner``'s forward whose solver forward runs, with the call that
    runs it (``"optmodel.solve()"``).

    Example:
        >>> import torch
        >>> def _solve(c, model):
        ...     opt = model.optmodel
        ...     opt.setObj(c)
        ...     return opt.solve()
        >>> class Decide(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, cost, module):
        ...         return _solve(cost.detach(), module)
        >>> solver_arguments(Decide, ["cost", "module"])
        {'module': 'opt.solve()'}
    """
    forward = vars(owner).get("forward") if isinstance(owner, type) else None
    forward = getattr(forward, "__func__", forward)
    if forward is None:
        return {}
    found = {}
    for name in names:
        call = _reaches(forward, {name}, 0, set(), {name: _annotated_class(forward, name)})
        if call is not None:
            found[name] = call
    return found


def _annotated_class(fn: Any, name: str) -> type | None:
    """The class ``name`` is annotated with in ``fn``'s signature (``module: SPOPlus``)."""
    try:
        annotation = inspect.signature(fn).parameters[name].annotation
    except (TypeError, ValueError, KeyError):
        return None
    if isinstance(annotation, str):
        annotation = getattr(fn, "__globals__", {}).get(annotation)
    return annotation if isinstance(annotation, type) else None


def _reaches(fn: Any, derived: set[str], depth: int, seen: set[int],
             classes: dict[str, type | None] | None = None) -> str | None:
    fn = inspect.unwrap(fn)  # @torch.no_grad(): the wrapper's globals are torch's
    tree = _parse(fn)
    if tree is None or id(fn) in seen:
        return None
    seen.add(id(fn))
    derived = set(derived)
    for node in ast.walk(tree):  # opt = module.optmodel, m = module
        if isinstance(node, ast.Assign) and _root(node.value) in derived:
            derived |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    scope = getattr(fn, "__globals__", {})
    tensors = _used_as_tensors(tree, derived)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in SOLVE_METHODS and \
                _root(func.value) in derived and not (
                    isinstance(func.value, ast.Name) and func.value.id in tensors
                    and hasattr(_tensor_class(), func.attr)):
            return f"{ast.unparse(func)}()"
        helper = scope.get(func.id) if isinstance(func, ast.Name) else None
        owner = (classes or {}).get(func.value.id) if isinstance(func, ast.Attribute) and \
            isinstance(func.value, ast.Name) else None
        method = inspect.getattr_static(owner, func.attr, None) if owner is not None else None
        if depth < _DEPTH and inspect.isfunction(method):  # module._frank_wolfe(theta)
            params = _positional(method)
            if params and (call := _reaches(method, {params[0]}, depth + 1, seen)) is not None:
                return call
        if depth < _DEPTH and inspect.isfunction(helper):
            params = _positional(helper)
            passed = {params[i] for i, a in enumerate(node.args[:len(params)])
                      if _root(a) in derived}
            passed |= {k.arg for k in node.keywords if k.arg and _root(k.value) in derived}
            if passed and (call := _reaches(helper, passed, depth + 1, seen)) is not None:
                return call
    return None


def _used_as_tensors(tree: ast.AST, derived: set[str]) -> set[str]:
    """Names in ``derived`` the code also uses as tensors (``x.shape``, ``x.new_full(...)``,
    ``x.dim()``): on such a name ``x.argmax(dim=1)`` is the tensor method, not a solver's.
    The solver methods themselves are no evidence (they are what is in question)."""
    from gradsmith.discovery.hints import _TENSOR_ATTRS

    evidence = _TENSOR_ATTRS - SOLVE_METHODS - {"max", "min"}
    return {node.value.id for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
            and node.value.id in derived and node.attr in evidence}


def _tensor_class() -> type:
    import torch

    return torch.Tensor


def _root(node: ast.AST) -> str | None:
    """``module`` for ``module``, ``module.optmodel``, ``module.optmodel.x``."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _positional(fn: Any) -> list[str]:
    try:
        return [p.name for p in inspect.signature(fn).parameters.values()
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return []


def solver_reason(name: str, call: str, annotation: str | None) -> str:
    """Why a Function with solver argument ``name`` is skipped (for :class:`NoInputs`)."""
    kind = f" of type {annotation}" if annotation else ""
    return (f"{name!r} is an object{kind} whose solver forward runs ({call}), and backward's "
            "formula holds only if that returns a true optimum: a stand-in solver cannot "
            f"promise one, so gradsmith does not invent it. Pass your own {name} (with a "
            "small problem) in the example below, in place of the `...`")


def solver_skip(fn: Any, owner: Any, params: list, plan: list, hints: dict) -> str | None:
    """The skip reason, with a ``@gradsmith.example`` line whose solver entries are ``...``,
    when an argument of ``owner``'s forward is a solver object; None otherwise."""
    from gradsmith.discovery.slots import Slot
    from gradsmith.discovery.suggestion import no_inputs_reason

    solvers = solver_arguments(owner, [p.name for p in params])
    if not solvers:
        return None
    name, call = next(iter(solvers.items()))
    annotation = next((p.annotation for p in params if p.name == name), None)
    annotation = annotation if isinstance(annotation, str) else getattr(
        annotation, "__name__", None)
    plan = [Slot(s.name, "solver", hint=s.hint) if s.name in solvers else s for s in plan]
    return no_inputs_reason(fn, solver_reason(name, call, annotation or None), plan, hints,
                            lead="no inputs are synthesised")
