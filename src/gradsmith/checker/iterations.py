"""A gradient mismatch that shrinks as forward's iteration count grows: convergence (private).

A forward that solves for a value by a fixed number of iterations (``for _ in range(num_iters)``:
bisection, a fixed point) with backward by the implicit-function theorem is correct for the
exact solution; at a small count the forward is itself off that solution, and finite
differences of it disagree with the exact derivative (corpus 11b's pytorch-toolbelt
``ComputeNormalization``: 5 bisection steps by default, 0.31 off at t = 0.8). Only where the
gradients check failed, an int argument that bounds such a loop in forward (or a function
forward hands it to, or a compiled extension's function, whose loop cannot be read) is raised
4x and 16x and the check run again: when the mismatch shrinks
and is gone at 16x, the verdict is the converged one's, with a warning that the count given
leaves the gradient inexact. A wrong backward still mismatches at 16x and keeps its FAIL.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable
from typing import Any

from gradsmith.checker.report import Finding
from gradsmith.discovery.callees import followed
from gradsmith.discovery.source import parse

FACTORS = (4, 16)
_LIBRARIES = {"torch", "numpy", "scipy", "triton", "math", "builtins"}


def iteration_positions(obj: Any, args: tuple) -> list[int]:
    """Positions in ``args`` of positive ints that bound a ``range`` loop in ``obj``'s forward
    or in a function forward passes them to.

    Example:
        >>> import torch
        >>> def _solve(a, steps):
        ...     for _ in range(steps):
        ...         a = a / 2
        ...     return a
        >>> class Solve(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, a, n_steps):
        ...         return _solve(a, n_steps)
        >>> iteration_positions(Solve, (torch.ones(2), 5))
        [1]
    """
    forward = getattr(obj, "forward", None) if isinstance(obj, type) else None
    tree = parse(forward) if forward is not None else None
    if tree is None:
        return []
    try:
        params = [p for p in inspect.signature(forward).parameters][1:]  # ctx left out
    except (TypeError, ValueError):
        return []
    bounds: set[str] = set(_range_bounds(tree) + _compiled_args(tree, forward)) & set(params)
    for helper, passed in followed(forward, tree, {p: p for p in params}, owner=obj):
        bounds |= {passed[n] for n in _range_bounds(helper) if n in passed}
    return [i for i, p in enumerate(params) if p in bounds and i < len(args)
            and type(args[i]) is int and args[i] > 0]


def _compiled_args(tree: ast.AST, forward: Any) -> list[str]:
    """Names forward passes to a compiled extension's function (``nsection_cpp.forward(X,
    alpha, n_iter, n_sections)``): its loops cannot be read, so its int arguments are
    candidates, and only the measured convergence in :func:`converged` makes one a count."""
    scope = getattr(forward, "__globals__", None) or {}
    names = []
    for call in ast.walk(tree):
        func = call.func if isinstance(call, ast.Call) else None
        if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)):
            continue
        module = scope.get(func.value.id)
        if not inspect.ismodule(module) or module.__name__.split(".")[0] in _LIBRARIES:
            continue
        target = getattr(module, func.attr, None)
        if callable(target) and not hasattr(target, "__code__"):  # built, not Python
            names += [a.id for a in call.args if isinstance(a, ast.Name)]
    return names


def _range_bounds(tree: ast.AST) -> list[str]:
    return [a.id for loop in ast.walk(tree) if isinstance(loop, ast.For)
            and isinstance(loop.iter, ast.Call) and isinstance(loop.iter.func, ast.Name)
            and loop.iter.func.id == "range" for a in loop.iter.args if isinstance(a, ast.Name)]


def converged(recheck: Callable[[list], Any], sets: list[tuple[str, tuple]],
              positions: list[int], report: Any, names: list[str]) -> Any | None:
    """The report on ``sets`` (``(description, args)``, as checked) at 16x the iteration
    counts, with a warning added, when the failed ``report``'s only errors are gradient
    mismatches that shrink at 4x and are gone at 16x; None otherwise (the backward's).
    ``recheck(sets)``: the merged report of the eager checks. The deployment checks' findings
    (compile, export ...) are kept from ``report``: they ran at the count the code is given,
    which is what it ships with, and a compile of a 16x unrolled loop is only slow."""
    if report.codes("error") != {"gradient-mismatch"}:
        return None
    worst, found, args = _worst(report), None, sets[0][1]
    for factor in FACTORS:
        try:
            found = recheck([(change, tuple(a * factor if i in positions and type(a) is int
                                            else a for i, a in enumerate(values)))
                             for change, values in sets])
        except Exception:  # a larger count the code rejects: the first verdict stands
            return None
        if "gradient-mismatch" in found.codes("error") and not _worst(found) < worst:
            return None  # not shrinking: not convergence
        worst = _worst(found)
    if found.codes("error"):
        return None
    what = ", ".join(f"{names[i] if i < len(names) else f'args[{i}]'}={args[i]}"
                     for i in positions)
    eager = set(found.checks)
    found.findings += [f for f in report.findings if f.check not in eager]
    found.checks += [c for c in report.checks if c not in eager]
    for check in report.checks:
        if check not in eager:
            found.skipped.pop(check, None)
            found.timings[check] = report.timings.get(check, 0.0)
    found.findings.append(Finding(
        "inexact-iterations", "warning",
        f"backward is the gradient of the converged solve: at {what} forward stops early and "
        f"finite differences disagree with backward (the mismatch shrinks at {FACTORS[0]}x the "
        f"count and is gone at {FACTORS[-1]}x, where the gradients were checked and held)",
        "raise the iteration count where exact gradients matter, or iterate to a tolerance",
        "gradients", None, {"positions": positions, "factor": FACTORS[-1]}))
    return found


def _worst(report: Any) -> float:
    """The largest |analytic - numerical| over the gradient mismatches' examined elements."""
    diffs = [abs(e[1] - e[2]) for f in report.findings if f.code == "gradient-mismatch"
             for e in (f.details or {}).get("elements", [])
             if isinstance(e, (list, tuple)) and len(e) >= 3]
    return max(diffs, default=float("inf"))
