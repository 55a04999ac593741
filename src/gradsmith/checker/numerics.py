"""Finite differences: the numerical side of every gradient comparison.

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
          s: Settings) -> InputResult:
    """Element-by-element comparison of ``(J^T v)_j`` for input ``t``."""
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
        fp, fm = _pair(problem, t, j, s.h)
        C[:, j] = V @ (fp - fm)
        S[:, j] = Vabs @ (fp - fm).abs()
        L[:, j] = V @ (f0 - fm)
        R[:, j] = V @ (fp - f0)
    C, S, L, R = C / (2 * s.h), S / (2 * s.h), L / s.h, R / s.h
    numeric_ok = torch.isfinite(C).all(0) & torch.isfinite(L).all(0) & torch.isfinite(R).all(0)
    analytic_ok = torch.isfinite(A).all(0)
    res.nan_numerical = torch.nonzero(~numeric_ok).reshape(-1).tolist()
    res.nan_analytic = torch.nonzero(numeric_ok & ~analytic_ok).reshape(-1).tolist()
    bad = ((A - C).abs() > s.atol + s.rtol * S).any(0) & numeric_ok & analytic_ok
    suspects = torch.nonzero(bad).reshape(-1).tolist()
    for j in suspects[:MAX_CONFIRM]:
        _judge(problem, res, t, j, V, A[:, j], C[:, j], S[:, j], L[:, j], R[:, j], s)
    for j in suspects[MAX_CONFIRM:]:
        k = int((A[:, j] - C[:, j]).abs().argmax())
        res.mismatches.append(Element(j, float(A[k, j]), float(C[k, j])))
    return res


def _judge(problem, res, t, j, V, a, C, S, L, R, s):
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
    fp, fm = _pair(problem, t, j, s.h / 8)
    small = V @ (fp - fm) / (2 * s.h / 8)
    grows = small.abs() > 4 * C.abs()
    return bool(grows.any() and (C.abs() > 1e3 * (s.atol + s.rtol)).any())


def _agrees_at_larger_steps(problem, t, j, V, a, s) -> bool:
    """Guard against noisy forwards (e.g. float32 inside): a consistent estimate at a larger
    step that matches the analytic value means the first difference was noise, not a bug."""
    prev = None
    for h in (1e-4, 5e-5, 1e-3, 5e-4):
        fp, fm = _pair(problem, t, j, h)
        C = V @ (fp - fm) / (2 * h)
        S = V.abs() @ (fp - fm).abs() / (2 * h)
        tol = s.atol + s.rtol * S
        if prev is not None:
            consistent = bool(((C - prev).abs() <= tol).all())
            if consistent and bool(((a - C).abs() <= tol).all()):
                return True
            prev = None
        else:
            prev = C
    return False


def _pair(problem: Problem, t: int, j: int, h: float) -> tuple[torch.Tensor, torch.Tensor]:
    x = problem.xs[t]
    delta = torch.zeros_like(x).reshape(-1)
    delta[j] = h
    delta = delta.reshape(x.shape)
    fp = problem.shifted(t, delta).to(torch.float64)
    fm = problem.shifted(t, -delta).to(torch.float64)
    return fp, fm


def column(problem: Problem, t: int, j: int, h: float) -> torch.Tensor:
    """Numerical Jacobian column ``d out / d x_t[j]`` (central difference)."""
    fp, fm = _pair(problem, t, j, h)
    return (fp - fm) / (2 * h)


# -- probe: random directions with a noise-derived tolerance --------------------------------------
@dataclass
class Directional:
    analytic: float
    numerical: float
    tol: float
    h: float = 0.0

    @property
    def bad(self) -> bool:
        return not abs(self.analytic - self.numerical) <= self.tol


def directional(problem: Problem, t: int, g: torch.Tensor, v: torch.Tensor, u: torch.Tensor,
                f0: torch.Tensor, s: Settings) -> Directional:
    """Compare ``<g, u>`` with the numerical ``v^T J u``; tolerance from measured noise."""
    g64, u64, v64 = g.to(torch.float64), u.to(torch.float64), v.to(torch.float64)
    a = float((g64 * u64).sum())
    floor = 1e3 * s.eps * float((g64 * u64).abs().sum())
    scale_f = float((v64.abs() * f0.abs()).sum())
    best = None
    for h in _steps(s):
        d1 = _dir(problem, t, u, v64, h)
        d2 = _dir(problem, t, u, v64, h / 2)
        rich = (4 * d2 - d1) / 3
        tol = 10 * abs(d1 - d2) + 50 * s.eps * scale_f / h + floor
        if s.user_tolerance:
            tol = max(tol, s.atol + s.rtol * abs(rich))
        cand = Directional(a, rich, tol if math.isfinite(tol) else math.inf, h)
        if best is None or cand.tol < best.tol:
            best = cand
        # A larger step only helps when the estimate is dominated by noise.
        if best.tol <= 1e-3 * max(abs(a), abs(rich), floor):
            break
    return best


def _steps(s: Settings) -> tuple[float, ...]:
    return (s.h, s.h * 100, s.h * 1000)


def _dir(problem: Problem, t: int, u: torch.Tensor, v64: torch.Tensor, h: float) -> float:
    fp = problem.shifted(t, h * u).to(torch.float64)
    fm = problem.shifted(t, -h * u).to(torch.float64)
    return float((v64 * (fp - fm)).sum()) / (2 * h)


def probe(problem: Problem, t: int, vs: list[torch.Tensor], grads: list[list[torch.Tensor]],
          s: Settings, gen: torch.Generator) -> InputResult:
    """Random-direction probes for input ``t``; bisection + per-element checks on failure.

    Elements that sit where kinks usually are (exact zeros, values repeated in the tensor:
    clamp bounds, ties) are left out of the probes and checked one by one on a sample, so a
    large input with many exact kinks does not fail the probe.
    """
    res = InputResult(t, problem.labels[t], "probe")
    x = problem.xs[t]
    f0 = problem.value().to(torch.float64)
    smooth, suspects = _kink_suspects(x)
    worst = None
    for v, g in zip(vs, grads):
        gt = g[t]
        if not torch.isfinite(gt).all():
            res.nan_analytic = torch.nonzero(~torch.isfinite(gt.reshape(-1))).reshape(-1)[:20].tolist()
            return res
        for _ in range(s.n_u):
            u = (torch.randint(0, 2, x.shape, generator=gen, dtype=torch.int8) * 2 - 1).to(x.dtype)
            if smooth is not None:
                u = u * smooth
            d = directional(problem, t, gt, v, u, f0, s)
            if d.bad and (worst is None or _excess(d) > _excess(worst[0])):
                worst = (d, v, gt, u)
    res.probe = {"probes": s.n_v * s.n_u, "failed": False, "kink_suspects": len(suspects)}
    culprits, widespread = [], False
    if worst is not None:
        d, v, gt, u = worst
        ratio = d.analytic / d.numerical if d.numerical != 0 else math.inf
        res.probe.update(failed=True, analytic=d.analytic, numerical=d.numerical, tol=d.tol,
                         ratio=ratio)
        culprits, widespread = _bisect(problem, t, gt, v, u, f0, s, d)
        res.probe["widespread"] = widespread
    v, gt = vs[0], grads[0][t]
    picks = torch.randperm(len(suspects), generator=gen)[:16] if len(suspects) else []
    _check_elements(problem, res, t, v, gt, f0, s, culprits + [int(suspects[i]) for i in picks])
    if worst is not None and res.kinks and not res.mismatches and not widespread:
        res.probe["failed"] = False  # every culprit sits on a kink
    return res


def _kink_suspects(x: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor]:
    """(mask of elements safe to probe or None, flat indices of kink suspects)."""
    flat = x.reshape(-1)
    order = torch.argsort(flat)
    ordered = flat[order]
    tie = torch.zeros(flat.numel(), dtype=torch.bool)
    if flat.numel() > 1:
        same = ordered[1:] == ordered[:-1]
        tie[order[1:][same]] = True
        tie[order[:-1][same]] = True
    suspect = tie | (flat == 0)
    count = int(suspect.sum())
    if count == 0 or count > flat.numel() // 2:
        return None, torch.zeros(0, dtype=torch.long)
    return (~suspect).reshape(x.shape).to(x.dtype), torch.nonzero(suspect).reshape(-1)


def _check_elements(problem, res, t, v, gt, f0, s, elements) -> None:
    V = v.to(torch.float64).reshape(1, -1)
    a_all = gt.reshape(-1).to(torch.float64)
    for j in dict.fromkeys(elements):
        fp, fm = _pair(problem, t, j, s.h)
        C = V @ (fp - fm) / (2 * s.h)
        S = V.abs() @ (fp - fm).abs() / (2 * s.h)
        L, R = V @ (f0 - fm) / s.h, V @ (fp - f0) / s.h
        a = a_all[j:j + 1]
        if bool(((a - C).abs() > s.atol + s.rtol * S).any()):
            _judge(problem, res, t, j, V, a, C, S, L, R, s)


def _excess(d: Directional) -> float:
    return abs(d.analytic - d.numerical) / max(d.tol, 1e-300)


def _bisect(problem, t, g, v, u, f0, s, top: Directional) -> tuple[list[int], bool]:
    """Narrow a failing probe down to at most BEAM elements. Returns (elements, widespread).

    The residual ``r(S) = <g, u_S> - v^T J u_S`` is linear in the support ``S``, so only one
    half of each group is evaluated (one central difference at the step the top-level probe
    chose); the other half's residual is the difference. Once more than BEAM groups are
    flagged the error is widespread: elements are then sampled from the flagged groups.
    """
    n = u.numel()
    flat_u = u.reshape(-1)
    flat_g = g.reshape(-1).to(torch.float64)
    v64 = v.to(torch.float64)
    tol = top.tol
    groups = [(torch.arange(n), top.analytic - top.numerical)]
    while any(len(grp) > 1 for grp, _ in groups):
        children = []
        for grp, r in groups:
            if len(grp) == 1:
                children.append((grp, r))
                continue
            half = grp[: len(grp) // 2]
            mask = torch.zeros(n, dtype=u.dtype)
            mask[half] = flat_u[half]
            a = float((flat_g[half] * flat_u[half].to(torch.float64)).sum())
            r1 = a - _dir(problem, t, mask.reshape(u.shape), v64, top.h)
            for part, rp in ((half, r1), (grp[len(grp) // 2:], r - r1)):
                if abs(rp) > tol / 2:
                    children.append((part, rp))
        if not children:
            break
        if len(children) > BEAM:
            gen = torch.Generator().manual_seed(n)
            picks = []
            for grp, _ in sorted(children, key=lambda c: -abs(c[1]))[:BEAM]:
                picks.append(int(grp[int(torch.randint(len(grp), (1,), generator=gen))]))
            return sorted(picks), True
        groups = children
    return sorted(int(grp[0]) for grp, _ in groups if len(grp) == 1), False
