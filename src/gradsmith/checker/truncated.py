"""A backward that is the gradient of an iteration cut short: it converges as the count grows.

DifferentiableSVD's ``Sqrtm(input, iterN)`` returns the exact matrix square root (by SVD)
while its backward is, deliberately, the gradient of ``iterN`` Newton-Schulz steps (corpus 8a
held-out, issue 18). At ``iterN=3`` that gradient is 20 % off forward's: a
``gradient-mismatch`` with no declaration, although nothing is wrong with the code beyond the
truncation its author chose. A truncated series, a fixed number of fixed-point or Newton
steps in backward: the same shape.

The signature: forward takes a small integer (a count), and as it is doubled (``n, 2n, 4n,
8n``, at most :data:`MAX_COUNT`) the disagreement between backward and finite differences of
forward shrinks at every step, until it is within :data:`AGREE` (what a correct float64
gradient shows). A wrong formula, a missing term, a transposed factor does not go away as the
count grows, so it keeps its ``gradient-mismatch``. What this verifies is backward's limit:
its algorithm is the gradient's, cut short; the line it prints checks the Function at the
count where it agrees. The truncation at the user's count has no reference here (only a
``surrogate=`` writing forward as that many steps would state it), and the finding says so.
"""

from __future__ import annotations

import time

import torch

from gradsmith.checker import reported, rng, suggest, symmetric
from gradsmith.checker.estimator_signature import Signature
from gradsmith.checker.numerics import InputResult
from gradsmith.checker.problem import Problem
from gradsmith.checker.session import Session

#: The largest count tried (doubling from the user's; a larger one is not a small count).
MAX_COUNT = 64
#: Relative disagreement of directional derivatives at which backward agrees with forward
#: (float64 central differences are good to about 1e-9 here).
AGREE = 1e-6
DIRECTIONS = 3
#: Each doubling of the count must cut the mismatch to below this fraction of the last one (a
#: Newton or fixed-point iteration's does, by far; a first-order discretisation's halves it,
#: and never reaches :data:`AGREE` in four doublings).
SHRINK = 0.25
#: Seconds the doublings may take per check, all counts together (failing Functions only).
BUDGET = 10.0
#: Tensors up to this many elements are written by value in the printed line: the check's own
#: inputs (an SPD matrix stays one), so the line checks what was measured.
BY_VALUE = 64


def fit(session: Session, problem: Problem, results: list[InputResult]
        ) -> tuple[dict[int, Signature], suggest.Declaration] | None:
    """The signatures of the failing inputs and the line at a converged count, or None."""
    failed = [r for r in results if r.failed and not r.nan_analytic]
    if not failed or any(x.dtype != torch.float64 for x in problem.xs):
        return None
    started = time.perf_counter()
    for leaf, name, n in _counts(session):
        errors: list[tuple[int, float]] = []
        for m in [n * k for k in (1, 2, 4, 8) if n * k <= MAX_COUNT]:
            # a larger count costs more (a finer grid, more steps): stop where the mismatch
            # does not shrink enough to reach agreement, or the budget is spent
            if time.perf_counter() - started > BUDGET or (
                    len(errors) >= 2 and not errors[-1][1] < SHRINK * errors[-2][1]):
                break
            error = _error(session, leaf, m)
            if error is None:
                break
            errors.append((m, error))
            if error <= AGREE:
                break
        if not _converges(errors) or _forward_moves(session, leaf, n, errors[-1][0]):
            continue  # forward cut short, backward the limit's: iterations.py's, not an estimator
        sigs = {r.t: Signature(r.t, r.label, "truncated", total=problem.xs[r.t].numel(),
                               scale=errors[0][1], factor=name, count=n) for r in failed}
        if reported.known("undeclared-estimator", failed[0].label):
            return sigs, suggest.Declaration("(the first input set's)", False,
                                             "already reported on an earlier input set")
        return sigs, _declaration(session, leaf, name, errors)
    return None


def _counts(session: Session) -> list[tuple[int, str, int]]:
    """(leaf, parameter name, value) of each top-level integer argument from 1 to 32."""
    args = session.subject.args
    names = suggest.names(session)
    out = []
    for i, value in enumerate(args.values):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 32:
            continue
        leaf = next((j for j in range(len(args.labels))
                     if args.top_index[j] == i and args.leaf(j) is value), None)
        if leaf is not None:
            out.append((leaf, names[i], value))
    return out


def _error(session: Session, leaf: int, count: int) -> float | None:
    """The largest relative disagreement, over random directions, between backward's
    directional derivative and forward's central difference with the count set to ``count``
    (None when the Function does not run there)."""
    args = session.subject.args
    with args.swapped({leaf: count}):
        try:
            problem = symmetric.contracted(session, session.subject.problem())
            gen = rng.generator(59)
            v = torch.randn(problem.m, generator=gen, dtype=torch.float64)
            grads = problem.vjp(v)
            worst = 0.0
            for _ in range(DIRECTIONS):
                us = [torch.randn(x.shape, generator=gen, dtype=x.dtype) for x in problem.xs]
                h = 1e-5 * max(1.0, *(float(x.abs().max()) for x in problem.xs))
                plus = problem.value([x + h * u for x, u in zip(problem.xs, us)],
                                     frozenset(range(len(us))))
                minus = problem.value([x - h * u for x, u in zip(problem.xs, us)],
                                      frozenset(range(len(us))))
                numerical = float(v @ (plus - minus).to(torch.float64)) / (2 * h)
                analytic = sum(float((g.to(torch.float64) * u).sum())
                               for g, u in zip(grads, us))
                scale = max(abs(numerical), abs(analytic), 1e-12)
                worst = max(worst, abs(analytic - numerical) / scale)
        except Exception:  # noqa: BLE001 - user code: another count may not run at all
            return None
    return worst if worst == worst else None  # NaN: no verdict


def _forward_moves(session: Session, leaf: int, count: int, last: int) -> bool:
    """Forward's outputs change between the user's count and ``last``: forward is the
    iteration cut short (an n-section entmax, a bisection in a compiled extension), and a
    backward exact at its output converges with it; a truncated backward's forward is exact
    at any count (an SVD square root, the count read only by backward)."""
    args = session.subject.args
    values = []
    for m in (count, last):
        with args.swapped({leaf: m}):
            try:
                problem = session.subject.problem()
                values.append(problem.value().to(torch.float64))
            except Exception:  # noqa: BLE001 - user code: treat as not shown to move
                return False
    a, b = values
    if a.shape != b.shape:
        return False
    return float((a - b).abs().max()) > 1e-10 * max(1.0, float(b.abs().max()))


def _converges(errors: list[tuple[int, float]]) -> bool:
    """Off at the user's count, shrinking at every doubling, agreeing at the last one."""
    return (len(errors) >= 3 and errors[0][1] > 100 * AGREE and errors[-1][1] <= AGREE
            and all(b[1] < SHRINK * a[1] for a, b in zip(errors, errors[1:])))


def _declaration(session: Session, leaf: int, name: str, errors: list[tuple[int, float]]
                 ) -> suggest.Declaration:
    args = session.subject.args
    count = errors[-1][0]
    values = tuple(count if i == args.top_index[leaf] else v
                   for i, v in enumerate(args.values))
    line = f"@gradsmith.example(lambda: {suggest.render_args(values, by_value=BY_VALUE)})"
    trail = ", ".join(f"{e:.2g} at {name}={m}" for m, e in errors)
    note = (f"backward converges to forward's gradient as {name} grows (relative error "
            f"{trail}): its algorithm is the gradient's, cut short after {name} steps; the line "
            f"checks it at {name}={count}, where it agrees. The truncation at {name}="
            f"{errors[0][0]} itself is not verified: no reference for it exists here (a "
            f"surrogate= writing forward as those {errors[0][0]} steps would state it)")
    drawn = [a for a in suggest.flat(values) if isinstance(a, torch.Tensor) and a.numel() > BY_VALUE]
    if drawn:  # torch.randn in the line: other values than those measured (not an SPD one)
        return suggest.Declaration(line, False, note + "; write in its example the tensors "
                                   "your code passes: those over 64 elements are drawn afresh")
    return suggest.Declaration(line, True, note)

