"""Finite differences: the numerical side of every gradient comparison (exact mode here,
probe mode in :mod:`gradsmith.checker.probe`).

Two strategies, both comparing projections ``v^T J`` (analytic: one backward per ``v``) against
central differences, so their cost does not depend on the number of outputs:

- **exact** (small inputs): every input element ``j`` gets its own central difference, so
  ``(J^T v)_j`` is compared element by element for a few random ``v``, with gradcheck-like
  ``atol + rtol * |.|`` tolerances. One-sided differences come for free and decide kinks.
- **probe** (large inputs): random +-1 directions ``u`` give ``v^T J u`` analytically
  (``<J^T v, u>``) and numerically (Richardson-extrapolated central differences). The tolerance
  is derived from the *measured* finite-difference noise (estimate at ``h`` vs ``h/2``), not a
  fixed rtol, so it is many orders tighter than gradcheck's: a 1 % error everywhere moves the
  probe by 1 %, one element 2x off moves it by about ``1/sqrt(n)`` (1e-3 at 1e6 elements),
  while the noise is ~1e-9 in float64. A failing probe is localised by bisection (the mismatch
  is linear in ``u``, so it can be split over halves of the support) and the culprits are then
  checked element by element, with the kink rule.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from gradsmith.checker.problem import Problem

MAX_CONFIRM = 64
BEAM = 8


@dataclass
class Element:
    """Comparison at one input element, projected on one ``v`` (the worst of them)."""

    index: int
    analytic: float
    numerical: float
    left: float = math.nan
    right: float = math.nan
    kink: bool = False


@dataclass
class InputResult:
    """Outcome of the first-order comparison for one input tensor."""

    t: int
    label: str
    mode: str
    mismatches: list[Element] = field(default_factory=list)
    kinks: list[Element] = field(default_factory=list)
    nan_analytic: list[int] = field(default_factory=list)
    nan_numerical: list[int] = field(default_factory=list)
    probe: dict = field(default_factory=dict)
    # Exact mode: (analytic, numerical, tolerance) of every element, projected on the first
    # v; what estimator detection reads (numerical exactly 0, or a constant ratio).
    projection: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None

    @property
    def failed(self) -> bool:
        return bool(self.mismatches or self.nan_analytic or self.probe.get("failed"))


@dataclass
class Settings:
    atol: float = 1e-5
    rtol: float = 1e-3
    h: float = 1e-6
    eps: float = 2.2e-16
    user_tolerance: bool = False
    n_v: int = 2
    n_u: int = 2


def random_v(problem: Problem, count: int, gen: torch.Generator) -> list[torch.Tensor]:
    """Output-space directions: +-1 entries scaled by a random factor in [0.5, 1.5]."""
    m = problem.m
    dtype = problem.xs[0].dtype if problem.xs else torch.float64
    vs = []
    for _ in range(count):
        sign = torch.randint(0, 2, (m,), generator=gen, dtype=torch.int8).to(dtype) * 2 - 1
        vs.append(sign * (0.5 + torch.rand(m, generator=gen, dtype=torch.float64).to(dtype)))
    return vs


# -- exact: one central difference per input element ------------------------------------------------
def exact(problem: Problem, t: int, vs: list[torch.Tensor], grads: list[list[torch.Tensor]],
          s: Settings, confirm: int = MAX_CONFIRM, enough: int | None = None) -> InputResult:
    """Element-by-element comparison of ``(J^T v)_j`` for input ``t``; the first ``confirm``
    disagreeing elements are re-judged (kinks, larger steps, jumps), the rest are mismatches,
    as are those after ``enough`` re-judged elements were confirmed mismatches."""
    res = InputResult(t, problem.labels[t], "exact")
    x = problem.xs[t]
    n = x.numel()
    V = torch.stack(vs).to(torch.float64)
    Vabs = V.abs()
    A = torch.stack([g[t].reshape(-1).to(torch.float64) for g in grads])  # (k, n)
    f0 = problem.value().to(torch.float64)
    # Per column: central, absolute and one-sided projections; judged vectorised afterwards.
    C, S, L, R = (torch.empty(len(vs), n, dtype=torch.float64) for _ in range(4))
    for j in range(n):
        fp, fm = pair(problem, t, j, s.h)
        hj = step(problem, t, j, s.h)
        C[:, j] = V @ (fp - fm) / (2 * hj)
        S[:, j] = Vabs @ (fp - fm).abs() / (2 * hj)
        L[:, j] = V @ (f0 - fm) / hj
        R[:, j] = V @ (fp - f0) / hj
    numeric_ok = torch.isfinite(C).all(0) & torch.isfinite(L).all(0) & torch.isfinite(R).all(0)
    analytic_ok = torch.isfinite(A).all(0)
    # Where the absolute step failed (NaN outside the domain, or a disagreement) at a value
    # below 1 in magnitude, a step relative to it decides.
    first = ((A - C).abs() > s.atol + s.rtol * S).any(0) & analytic_ok
    for j in torch.nonzero(~numeric_ok | first).reshape(-1).tolist():
        retried = small_step(problem, t, j, V, s.h)
        if retried is not None and (not bool(numeric_ok[j]) or bool(
                ((A[:, j] - retried[0]).abs() <= s.atol + s.rtol * retried[1]).all())):
            C[:, j], S[:, j], L[:, j], R[:, j] = retried
            numeric_ok[j] = True
    res.nan_numerical = torch.nonzero(~numeric_ok).reshape(-1).tolist()
    res.nan_analytic = torch.nonzero(numeric_ok & ~analytic_ok).reshape(-1).tolist()
    res.projection = (A[0], C[0], s.atol + s.rtol * S[0])
    bad = ((A - C).abs() > s.atol + s.rtol * S).any(0) & numeric_ok & analytic_ok
    suspects = torch.nonzero(bad).reshape(-1).tolist()
    for i, j in enumerate(suspects):
        if i < confirm and (enough is None or len(res.mismatches) < enough):
            judge_element(problem, res, t, j, V, A[:, j], C[:, j], S[:, j], L[:, j], R[:, j], s)
            continue
        k = int((A[:, j] - C[:, j]).abs().argmax())
        res.mismatches.append(Element(j, float(A[k, j]), float(C[k, j])))
    return res


def judge_element(problem, res, t, j, V, a, C, S, L, R, s):
    tol = s.atol + s.rtol * S
    lo, hi = torch.minimum(L, R) - tol, torch.maximum(L, R) + tol
    k = int(((a - C).abs() / tol).argmax())
    one_sided_gap = (L - R).abs() > tol
    if bool(((a >= lo) & (a <= hi)).all()) and bool(one_sided_gap.any()):
        res.kinks.append(Element(j, float(a[k]), float(C[k]), float(L[k]), float(R[k]), True))
        return
    if _agrees_at_larger_steps(problem, t, j, V, a, s):
        return
    if _jumps(problem, t, j, V, C, s):
        res.kinks.append(Element(j, float(a[k]), float(C[k]), float(L[k]), float(R[k]), True))
        return
    res.mismatches.append(Element(j, float(a[k]), float(C[k]), float(L[k]), float(R[k])))


def _jumps(problem, t, j, V, C, s) -> bool:
    """A difference quotient that grows like 1/h as h shrinks: the function itself jumps at
    this point (e.g. the derivative of sign(x) at 0), so it has no derivative to compare."""
    fp, fm = pair(problem, t, j, s.h / 8)
    small = V @ (fp - fm) / (2 * step(problem, t, j, s.h / 8))
    grows = small.abs() > 4 * C.abs()
    return bool(grows.any() and (C.abs() > 1e3 * (s.atol + s.rtol)).any())


#: Steps of :func:`_agrees_at_larger_steps`, in pairs: 1.37e-4 and 1.37e-3, each with its
#: 1/1.7 partner. None is a whole multiple of a decimal or binary grid's half-spacing (1/100,
#: 1/1000, 1/2000, 1/1024 ...): at steps of 1e-3 and 5e-4 a ``round(x * 1000) / 1000`` crossed
#: exactly 2 and 1 grid points, its quotient was exactly 1, and a straight-through backward
#: PASSed as if the quantizer were noise (the same idea as :mod:`.approximating`'s ladder).
RETRY_STEPS = (1.37e-4, 1.37e-4 / 1.7, 1.37e-3, 1.37e-3 / 1.7)


def _agrees_at_larger_steps(problem, t, j, V, a, s) -> bool:
    """Guard against noisy forwards (e.g. float32 inside): a consistent estimate at a larger
    step that matches the analytic value means the first difference was noise, not a bug.
    The steps (:data:`RETRY_STEPS`) are incommensurate with common quantization grids, so a
    quantizer's quotient never lands on its straight-through gradient."""
    prev = None
    for h in RETRY_STEPS:
        fp, fm = pair(problem, t, j, h)
        hj = step(problem, t, j, h)
        C = V @ (fp - fm) / (2 * hj)
        S = V.abs() @ (fp - fm).abs() / (2 * hj)
        tol = s.atol + s.rtol * S
        if prev is not None:
            consistent = bool(((C - prev).abs() <= tol).all())
            if consistent and bool(((a - C).abs() <= tol).all()):
                return True
            prev = None
        else:
            prev = C
    return False


def pair(problem: Problem, t: int, j: int, h: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Forward at ``x_t[j] +- step(problem, t, j, h)``: callers divide by that step."""
    x = problem.xs[t]
    delta = torch.zeros_like(x).reshape(-1)
    delta[j] = step(problem, t, j, h)
    delta = delta.reshape(x.shape)
    fp = problem.shifted(t, delta).to(torch.float64)
    fm = problem.shifted(t, -delta).to(torch.float64)
    return fp, fm


#: Magnitude beyond which the finite-difference step grows with the element (``h * |x| /
#: RELATIVE_FROM``): below it an absolute step loses less than 1e-6 of itself to rounding
#: (float64), and every number stays what ``--repro`` scripts recompute.
RELATIVE_FROM = 1e3


def step(problem: Problem, t: int, j: int, h: float) -> float:
    """The finite-difference step at element ``j`` of input ``t``: ``h`` up to
    :data:`RELATIVE_FROM` in magnitude, proportional to the element beyond. At ``x = 1e12``
    an absolute step of 1e-6 is below the spacing of float64 numbers (``x + h == x``), and a
    correct ``2 * x`` looked flat, an undeclared estimator."""
    return h * step_scale(float(problem.xs[t].reshape(-1)[j]))


def step_scale(value: float) -> float:
    """The step's multiplier at an element of this value (see :func:`step`)."""
    big = abs(value) / RELATIVE_FROM
    return big if big > 1.0 and math.isfinite(big) else 1.0


def _base(problem: Problem) -> torch.Tensor:
    """``f(x)`` in float64, computed once per problem."""
    f0 = problem.__dict__.get("_fd_base")
    if f0 is None:
        f0 = problem.__dict__["_fd_base"] = problem.value().to(torch.float64)
    return f0


def small_step(problem: Problem, t: int, j: int, V: torch.Tensor, h: float
               ) -> tuple[torch.Tensor, ...] | None:
    """``(C, S, L, R)`` at element ``j`` with the step relative to a value below 1 in
    magnitude (``h * |x_j|``), or None (``x_j`` is 0, 1 or more, or the result is not
    finite). Tried where the absolute step failed: at ``x = 1e-12`` a step of 1e-6 leaves the
    domain of ``log`` or ``sqrt``."""
    value = abs(float(problem.xs[t].reshape(-1)[j]))
    if not 0.0 < value < 1.0:
        return None
    hj = h * value
    delta = torch.zeros_like(problem.xs[t]).reshape(-1)
    delta[j] = hj
    delta = delta.reshape(problem.xs[t].shape)
    fp = problem.shifted(t, delta).to(torch.float64)
    fm = problem.shifted(t, -delta).to(torch.float64)
    f0 = _base(problem)
    out = (V @ (fp - fm) / (2 * hj), V.abs() @ (fp - fm).abs() / (2 * hj),
           V @ (f0 - fm) / hj, V @ (fp - f0) / hj)
    return out if all(bool(torch.isfinite(c).all()) for c in out) else None


def column(problem: Problem, t: int, j: int, h: float) -> torch.Tensor:
    """Numerical Jacobian column ``d out / d x_t[j]`` (central difference)."""
    fp, fm = pair(problem, t, j, h)
    return (fp - fm) / (2 * step(problem, t, j, h))
