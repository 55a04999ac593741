"""An iterative solve whose result does not move at any step: unresolved, not an estimator.

A forward that solves an equation by iteration (Newton steps ``eta = eta - f / fp`` for a
fixed count, a fixed point iterated until a tolerance) with backward by the implicit function
theorem is correct where the solve is well posed. On inputs outside that domain the solve can
collapse: lattice_ml's ``SolveLambdaSUN`` (corpus 9a held-out) clamps its singular values to
``eps = 1e-16`` first, so on synthesised values with negative entries its solution is about
``1e-17`` wherever it is perturbed, and finite differences are exactly 0 at every step, while
backward (which does not differentiate the clamp) is not. That is not a piecewise-constant
forward with an invented backward (``undeclared-estimator``): the numerical side could not
resolve forward's derivative at these inputs, so the gradient is unchecked there.

The rule, for inputs read as straight-through (finite differences exactly 0 at every examined
element) only: forward, or a function of its module it hands its parameters to, holds a loop
(``for ... in range(...)`` or ``while``) that refines a value (assigns a name from an expression
that reads it, ``x = x - f / fp``, ``x -= ...``), and forward stays flat at each mismatching
element at every step of :data:`gradsmith.checker.approximating.SOLVED_STEPS` (up to 3.2e-2 of
the scale) too. Then the finding is an INCOMPLETE warning that names the loop and says what to
do (an example in the solve's domain); a stairstep the larger steps do resolve is
:func:`gradsmith.checker.approximating.solved`'s. A rounding, a sign or a quantizer has no such
loop and keeps its ``undeclared-estimator``.
"""

from __future__ import annotations

import ast
import inspect

import torch

from gradsmith.checker import approximating
from gradsmith.checker.estimator_signature import Signature
from gradsmith.checker.problem import Problem
from gradsmith.checker.report import Finding
from gradsmith.checker.session import Session
from gradsmith.discovery.callees import followed
from gradsmith.discovery.source import parse

FLAT = ("straight-through", "no-gradient")


def finding(session: Session, problem: Problem, results: list, sigs: dict[int, Signature],
            check: str) -> Finding | None:
    """The INCOMPLETE warning for straight-through signatures of an iterative solve that no
    step resolves, or None."""
    if not sigs or any(s.kind not in FLAT for s in sigs.values()) or problem.complex_inputs:
        return None
    loop = refining_loop(session.function_cls)
    vs, grads = session.cache.get(f"vjp:{check}", (None, None))
    if loop is None or not vs:
        return None
    V = torch.stack(vs).to(torch.float64)
    labels = []
    for res in results:
        sig = sigs.get(res.t)
        if sig is None or sig.kind != "straight-through":
            continue
        A = torch.stack([g[res.t].reshape(-1).to(torch.float64) for g in grads])
        for e in res.mismatches[:approximating.MAX_SOLVED]:
            diffs = approximating.central(problem, res.t, e.index, V,
                                          approximating.SOLVED_STEPS)
            big = float(A[:, e.index].abs().max())
            if diffs is None or any(bool((d.abs() > 1e-12 + 1e-9 * big).any()) for d in diffs):
                return None
        labels.append(res.label)
    if not labels:
        return None
    where, name = loop
    steps = ", ".join(f"{s:.2g}" for s in approximating.SOLVED_STEPS)
    return Finding(
        "check-incomplete", "warning",
        f"the gradient of {', '.join(labels)} could not be compared: forward is an iterative "
        f"solve (a loop in {where} refines `{name}`) and its result does not move at these "
        f"inputs, neither at the finite-difference step nor at {steps} times max(1, |x|): "
        "finite differences are exactly 0 where backward is not, which for a solve means it "
        "collapsed (inputs outside its domain: a clamp, a degenerate start) or stops before "
        "it resolves the step, not that forward is piecewise constant. Backward is unchecked, "
        "so the verdict is INCOMPLETE",
        "pass an example in the solve's domain (gradsmith.example(...) with the values the "
        "code is called with) so that forward moves with its inputs; if forward is meant to "
        "be piecewise constant, declare its estimator",
        check, labels[0],
        {"reason": f"iterative solve in {where} unresolved at every step", "incomplete": True,
         "loop": where, "refined": name})


def refining_loop(cls: type | None) -> tuple[str, str] | None:
    """``(function, name)`` of a loop that refines ``name`` in forward or in a function of
    its module that forward hands its parameters to, or None."""
    forward = getattr(cls, "forward", None) if cls is not None else None
    tree = parse(forward) if forward is not None else None
    if tree is None:
        return None
    try:
        params = list(inspect.signature(forward).parameters)
    except (TypeError, ValueError):
        return None
    trees = [tree] + [helper for helper, _ in followed(forward, tree, {p: p for p in params},
                                                       owner=cls)]
    for node in trees:
        name = _refined(node)
        if name is not None:
            fn = next((n.name for n in ast.walk(node)
                       if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), "forward")
            return fn, name
    return None


def _refined(tree: ast.AST) -> str | None:
    for loop in ast.walk(tree):
        if not (isinstance(loop, ast.While) or (
                isinstance(loop, ast.For) and isinstance(loop.iter, ast.Call)
                and isinstance(loop.iter.func, ast.Name) and loop.iter.func.id == "range")):
            continue
        for stmt in (n for body in loop.body for n in ast.walk(body)):
            if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
                return stmt.target.id
            if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                    and isinstance(stmt.targets[0], ast.Name)):
                name = stmt.targets[0].id
                if any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(stmt.value)):
                    return name
    return None
