"""An approximating forward: a small first-order mismatch that a path integral explains.

Some forwards approximate a function (a rational approximation of ``log Phi`` off by 2e-3, a
series cut short) while backward returns that function's exact derivative. Finite differences
of forward then differ from backward by up to about a percent at some points. That gradient is
not wrong (it is the better one), and by the error policy an error needs demonstrated harm.

The rule, for an input whose every mismatching element is within :data:`MAX_POINT` (1%) of
its finite difference: along a line through each of its worst elements (``x_j +- R``, ``R``
2, 1 or 0.5 times ``max(1, |x_j|)``, the longest on which forward and backward stay finite),
integrate backward's gradient (Simpson's rule, float64) and compare the integral with
forward's change over the line. If backward is the exact derivative of a function ``G``
within ``eps`` of forward, they differ by at most ``2 eps`` whatever the line's length; a
backward off by a relative ``r`` (a wrong factor, a missing term) is off by about ``r`` of
forward's change. So the mismatch is forward's own approximation error only when, on every
line, the integrated discrepancy is at most a quarter of the pointwise one and at most
:data:`MAX_INTEGRATED` (0.1%) of forward's change: then it is a ``gradient-mismatch``
**warning** naming both sizes. Anything else (a larger or persistent mismatch, a line leaving
forward's domain, a jump) stays an error.

The integral alone cannot tell which side approximates: a bug confined to a narrow region or a
single point (``grad * 1.005`` where ``2.9 < x < 3.1``) is also the derivative of a function
within a small ``eps`` of forward, one with kinks. So the mismatch's structure must be
forward's: on each line the fourth differences of backward's cell averages must be at most
:data:`MAX_ROUGH` of those of the mismatch (forward's cell slopes minus backward's). An
approximating forward wiggles around a smooth exact function; a backward that jumps, spikes or
oscillates where forward is smooth is a bug, and stays an error.

A forward computed by an iterative solver to a tolerance (a root by bisection, a fixed number
of iterations) is a staircase whose steps are the tolerance: at gradsmith's step (1e-6) its
finite differences are exactly 0 and it looks like a straight-through estimator, while backward
(the implicit function theorem) is the derivative of the root it converges to. A quantizer's
staircase is the same shape, only coarse: its steps are a visible fraction of the input's scale
(1/256 for 8 bits), where a solver's are below 1e-4 of it. So :func:`solved` re-differentiates
each mismatching element where forward is a staircase at the check's step (a difference
exactly 0, or one that changes when the step is cut by 8) at the three steps
:data:`SOLVED_STEPS` (3.2e-2, 1.9e-2 and 1.1e-2 of ``max(1, |x_j|)``, none commensurate with
another), Richardson-extrapolated pairwise against curvature: when both extrapolations agree
with backward within :data:`MAX_POINT`, the stairs are below about 1e-4 of the scale and the mismatch is the tolerance's, a ``gradient-mismatch``
**warning** naming the step. A wrong backward disagrees at every step and keeps its error; a
quantizer's stairs (a lattice of spacing ``d``) put up to ``d / 2h`` into each difference,
which no step of the ladder escapes unless ``d`` is below about 1e-4 of the scale.
"""

from __future__ import annotations

import math

import torch

from gradsmith.checker import numerics
from gradsmith.checker.problem import Problem
from gradsmith.checker.report import Finding
from gradsmith.checker.session import Session

#: Steps of :func:`solved`'s ladder, times ``max(1, |x_j|)``: 3.2e-2 / 1.7^i, a ratio that keeps
#: every step incommensurate with the others (a lattice's spacing divides at most one of them).
SOLVED_STEPS = tuple(3.2e-2 / 1.7 ** i for i in range(3))
MAX_SOLVED = 32  # mismatching elements re-differentiated per input, at most

MAX_POINT = 1e-2        # pointwise relative mismatch an approximating forward may explain
MAX_INTEGRATED = 1e-3   # integrated discrepancy, relative to forward's change, at most
RADII = (2.0, 1.0, 0.5)  # line half-lengths tried, times max(1, |x_j|): the longest finite
INTERVALS = 32          # Simpson intervals per line (even)
WORST = 3               # elements whose lines are integrated
MAX_ROUGH = 0.5         # backward's roughness along a line, relative to the mismatch's, at most


def explain(session: Session, problem: Problem, results: list[numerics.InputResult],
            check: str) -> list[Finding]:
    """Warnings for inputs whose mismatches an approximating forward explains (their
    mismatches are cleared, so no error is reported for them); nothing for the others."""
    if problem.complex_inputs or problem.complex_outputs:
        return []
    vs, _ = session.cache.get(f"vjp:{check}", (None, None))
    if not vs:
        return []
    findings = []
    for res in results:
        if res.mode != "exact" or not res.mismatches or res.nan_analytic or \
                res.probe.get("failed"):
            continue
        point = [_relative(e) for e in res.mismatches]
        if max(point) > MAX_POINT:
            continue
        worst = sorted(res.mismatches, key=_relative, reverse=True)[:WORST]
        lines = [_line(problem, res.t, e.index, vs[0]) for e in worst]
        if any(line is None for line in lines):
            continue
        if not all(gap <= min(_relative(e) / 4, MAX_INTEGRATED) and rough <= MAX_ROUGH
                   for e, (gap, _, _, rough) in zip(worst, lines)):
            continue
        findings.append(_warning(problem, res, max(point), lines, check))
        res.mismatches = []
    return findings


def _relative(e: numerics.Element) -> float:
    return abs(e.analytic - e.numerical) / max(abs(e.numerical), 1e-300)


def _line(problem: Problem, t: int, j: int, v: torch.Tensor
          ) -> tuple[float, float, float, float] | None:
    """(integrated discrepancy relative to forward's change, its absolute size, the radius,
    backward's roughness relative to the mismatch's) on the longest line through element
    ``j`` where everything is finite, or None."""
    x = problem.xs[t]
    scale = max(1.0, abs(float(x.reshape(-1)[j])))
    v64 = v.to(torch.float64)
    for radius in (r * scale for r in RADII):
        grid = torch.linspace(-radius, radius, INTERVALS + 1, dtype=torch.float64).tolist()
        values = [_gradient_at(problem, t, j, v, s) for s in grid]
        forward = [float(v64 @ _shifted(problem, t, j, s)) for s in grid]
        change = forward[-1] - forward[0]
        if not all(math.isfinite(g) for g in values + forward) or change == 0.0:
            continue
        width = 2 * radius / INTERVALS
        weights = [1.0] + [4.0 if i % 2 else 2.0 for i in range(1, INTERVALS)] + [1.0]
        integral = width / 3 * sum(w * g for w, g in zip(weights, values))
        gap = abs(integral - change)
        return gap / abs(change), gap, radius, _roughness(values, forward, width)
    return None


def _roughness(values: list[float], forward: list[float], width: float) -> float:
    """Backward's roughness along a line relative to the mismatch's: the largest fourth
    difference of backward's cell averages (trapezoid) over the largest of the mismatch's
    (backward's cell averages minus forward's cell slopes). Near 0 when forward carries the
    mismatch's wiggle around a smooth backward; near 1 when backward carries it (a jump,
    a spike at one point, an oscillation) and forward is smooth: a bug."""
    b = torch.tensor(values, dtype=torch.float64)
    f = torch.tensor(forward, dtype=torch.float64)
    cells = (b[1:] + b[:-1]) / 2
    slopes = (f[1:] - f[:-1]) / width
    rough = torch.diff(cells, n=4).abs()
    wiggle = torch.diff(cells - slopes, n=4).abs()
    own, mismatch = float(rough.max()), float(wiggle.max())
    if mismatch == 0:
        return math.inf
    # and difference by difference: a backward bug beside a jump of forward's elsewhere on the
    # line (which makes the mismatch's largest difference large) is still backward's where it
    # is; a smooth backward's own differences (8 times their median, or 1% of the mismatch's
    # largest) are no bug (gpytorch's LogNormalCDF: phi/Phi growing towards the line's end)
    floor = 8 * rough.median() + 0.01 * mismatch
    local = rough / (wiggle + floor)
    return max(own / mismatch, float(local.max()))


def _delta(x: torch.Tensor, j: int, s: float) -> torch.Tensor:
    delta = torch.zeros_like(x).reshape(-1)
    delta[j] = s
    return delta.reshape(x.shape)


def _shifted(problem: Problem, t: int, j: int, s: float) -> torch.Tensor:
    return problem.shifted(t, _delta(problem.xs[t], j, s)).to(torch.float64)


def _gradient_at(problem: Problem, t: int, j: int, v: torch.Tensor, s: float) -> float:
    """``(J^T v)_j`` with element ``j`` of input ``t`` moved by ``s``."""
    xs = list(problem.xs)
    xs[t] = xs[t] + _delta(xs[t], j, s)
    moved = Problem(problem.f, xs, problem.labels, accumulate=problem.accumulate,
                    backward_seed=problem.backward_seed)
    try:
        return float(moved.vjp(v)[t].reshape(-1)[j])
    except Exception:  # noqa: BLE001 - user code: no line, no explanation (the error stays)
        return math.nan


def _warning(problem: Problem, res: numerics.InputResult, point: float,
             lines: list[tuple[float, float, float]], check: str) -> Finding:
    where = ", ".join(problem.element(res.t, e.index) for e in res.mismatches[:5])
    integrated = max(line[0] for line in lines)
    eps = max(line[1] for line in lines) / 2
    radius = min(line[2] for line in lines)
    return Finding(
        "gradient-mismatch", "warning",
        f"gradient of {res.label} differs from finite differences of forward by up to "
        f"{point:.2%} at {where} ({len(res.mismatches)} of {problem.xs[res.t].numel()} "
        f"elements), but integrated along "
        f"+-{radius:g} around them it agrees with forward's change to {integrated:.3%}: "
        f"backward is the derivative of a function within about {eps:.2g} of forward, so "
        "forward approximates what backward differentiates (a rational approximation, a "
        "series cut short); not a wrong gradient",
        "nothing to fix if forward is a deliberate approximation; if forward should be exact, "
        "its approximation error is the difference (or make backward differentiate the "
        "approximation itself)", check, res.label,
        {"approximating_forward": True, "relative": point, "integrated": integrated,
         "eps": eps, "elements": [e.index for e in res.mismatches[:20]]})


def solved(session: Session, problem: Problem, results: list[numerics.InputResult],
           check: str) -> list[Finding]:
    """Warnings for inputs whose forward is a staircase at the finite-difference step only
    because it converges to a tolerance: every mismatching element agrees with backward at
    each of the ladder's larger steps (see the module docstring).
    Their mismatches are cleared; the others are left as they are."""
    if problem.complex_inputs or problem.complex_outputs:
        return []
    vs, grads = session.cache.get(f"vjp:{check}", (None, None))
    if not vs:
        return []
    V = torch.stack(vs).to(torch.float64)
    findings = []
    for res in results:
        if res.mode != "exact" or not res.mismatches or res.nan_analytic or \
                res.probe.get("failed") or len(res.mismatches) > MAX_SOLVED:
            continue
        A = torch.stack([g[res.t].reshape(-1).to(torch.float64) for g in grads])
        s = session.settings
        if all(_stairs(problem, res.t, e, V, s) and _settles(problem, res.t, e.index, V,
                                                                A[:, e.index], s.atol)
               for e in res.mismatches):
            findings.append(_solved_warning(problem, res, check))
            res.mismatches = []
    return findings


def _stairs(problem: Problem, t: int, e: numerics.Element, V: torch.Tensor,
            s: numerics.Settings) -> bool:
    """Whether forward is a staircase at element ``e`` at the check's step: its difference
    there is exactly 0, or changes beyond the tolerance when the step is cut by 8 (a smooth
    forward's does not, whatever backward returns)."""
    if e.numerical == 0.0:
        return True
    diffs = _central(problem, t, e.index, V, (s.h, s.h / 8))
    if diffs is None:
        return False
    big, small = diffs
    return bool(((big - small).abs() > s.atol + s.rtol * torch.maximum(
        big.abs(), small.abs())).any())


def _settles(problem: Problem, t: int, j: int, V: torch.Tensor, a: torch.Tensor,
             atol: float) -> bool:
    """Whether ``(J^T v)_j`` agrees with ``a`` (every ``v``) within :data:`MAX_POINT` at each
    Richardson extrapolation of two neighbouring steps of the ladder."""
    diffs = _central(problem, t, j, V, SOLVED_STEPS)
    if diffs is None:
        return False
    ratio2 = (SOLVED_STEPS[0] / SOLVED_STEPS[1]) ** 2
    for coarse, fine in zip(diffs, diffs[1:]):
        extrapolated = (ratio2 * fine - coarse) / (ratio2 - 1)
        if not bool(torch.isfinite(extrapolated).all()) or bool(
                ((extrapolated - a).abs() > atol + MAX_POINT * a.abs()).any()):
            return False
    return True


def _central(problem: Problem, t: int, j: int, V: torch.Tensor,
             steps: tuple[float, ...]) -> list[torch.Tensor] | None:
    """``V @`` the central difference of forward along element ``j`` of input ``t``, one per
    step (times ``max(1, |x_j|)``); None when forward raises at a shifted point."""
    scale = max(1.0, abs(float(problem.xs[t].reshape(-1)[j])))
    diffs = []
    for h in (scale * step for step in steps):
        try:
            up, down = _shifted(problem, t, j, h), _shifted(problem, t, j, -h)
        except Exception:  # noqa: BLE001 - user code off its domain: no explanation
            return None
        diffs.append(V @ (up - down).reshape(-1) / (2 * h))
    return diffs


def _solved_warning(problem: Problem, res: numerics.InputResult, check: str) -> Finding:
    where = ", ".join(problem.element(res.t, e.index) for e in res.mismatches[:5])
    steps = ", ".join(f"{s:.2g}" for s in SOLVED_STEPS)
    return Finding(
        "gradient-mismatch", "warning",
        f"gradient of {res.label}: forward is a staircase at the finite-difference step at "
        f"{where} ({len(res.mismatches)} of {problem.xs[res.t].numel()} elements: differences "
        f"exactly 0, or changing with the step), but with steps {steps} times max(1, |x|) "
        f"(Richardson-extrapolated) its differences agree with backward within "
        f"{MAX_POINT:.0%}: "
        "forward converges to a tolerance (an iterative solver, a bisection, a fixed number "
        "of iterations) whose steps are below about 1e-4 of the input's scale, and backward "
        "is the derivative of what it converges to; not an estimator",
        "nothing to fix if forward is an iterative solver; tighten its tolerance (more "
        "iterations) to make forward smooth at finite-difference scale, or declare "
        "approximate=True to have the gradient's quality measured", check, res.label,
        {"converged_forward": True, "steps": list(SOLVED_STEPS),
         "elements": [e.index for e in res.mismatches[:20]]})


# Shared with :mod:`gradsmith.checker.unresolved_solve` (a solve no step of the ladder resolves).
central = _central
