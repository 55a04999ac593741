"""Probe mode for large inputs: random directions, a noise-derived tolerance, bisection.

See :mod:`gradsmith.checker.numerics` for the rationale; the per-element fallback and the kink
rule are shared with exact mode.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from gradsmith.checker import rng
from gradsmith.checker.numerics import (
    BEAM,
    RELATIVE_FROM,
    InputResult,
    Settings,
    judge_element,
    pair,
    step,
)
from gradsmith.checker.problem import Problem


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
        cand = Directional(a, rich, tol if math.isfinite(tol) else math.inf, h)
        if best is not None and not _consistent(best, cand):
            break  # the larger step leaves the region where the function is near-linear
        if best is None or cand.tol < best.tol:
            best = cand
        # A larger step only helps when the estimate is dominated by noise.
        if best.tol <= 1e-3 * max(abs(a), abs(rich), floor):
            break
    if best is not None and s.user_tolerance:
        # The step is chosen by its measured noise alone; flooring before choosing would
        # favour a step whose (wrong) estimate is near 0, where rtol * |estimate| is smallest.
        best = Directional(best.analytic, best.numerical,
                           max(best.tol, s.atol + s.rtol * abs(best.numerical)), best.h)
    return best


def _consistent(small: Directional, large: Directional) -> bool:
    """Whether a larger step's estimate lies within the smaller step's measured band.

    A larger step is taken to quiet noise (a float32 forward at step 1e-2), never to replace a
    well-measured estimate: at float32's steps x 100 and x 1000 (1 and 10) the inputs move past
    poles and selection boundaries (a row sum crossing 0 in ``w / w.sum()``, a top-k set
    changing), where both halved steps see the same far-away plateau, agree with each other and
    so report a tiny noise, around an estimate that has nothing to do with the derivative.
    """
    return abs(large.numerical - small.numerical) <= small.tol + large.tol


def _steps(s: Settings) -> tuple[float, ...]:
    return (s.h, s.h * 100, s.h * 1000)


def _dir(problem: Problem, t: int, u: torch.Tensor, v64: torch.Tensor, h: float) -> float:
    fp = problem.shifted(t, h * u).to(torch.float64)
    fm = problem.shifted(t, -h * u).to(torch.float64)
    return float((v64 * (fp - fm)).sum()) / (2 * h)


def probe(problem: Problem, t: int, vs: list[torch.Tensor], grads: list[list[torch.Tensor]],
          s: Settings, gen: torch.Generator, enough: int | None = None) -> InputResult:
    """Random-direction probes for input ``t``; bisection + per-element checks on failure.

    Elements that sit where kinks usually are (exact zeros, values repeated in the tensor:
    clamp bounds, ties) are left out of the probes and checked one by one on a sample, so a
    large input with many exact kinks does not fail the probe. Element checks stop once
    ``enough`` mismatches are confirmed (None: never), as exact mode's do.
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
            # the step follows each element's scale (see numerics.step): at 1e12 a step
            # of 1e-6 is lost in rounding; <g, u> is taken along the same direction
            u = u * (x.detach().abs() / RELATIVE_FROM).clamp(min=1).nan_to_num(1.0, 1.0, 1.0)
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
    _check_elements(problem, res, t, v, gt, f0, s, culprits + [int(suspects[i]) for i in picks],
                    enough)
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


def _check_elements(problem, res, t, v, gt, f0, s, elements, enough=None) -> None:
    V = v.to(torch.float64).reshape(1, -1)
    a_all = gt.reshape(-1).to(torch.float64)
    for j in dict.fromkeys(elements):
        if enough is not None and len(res.mismatches) >= enough:
            return
        fp, fm = pair(problem, t, j, s.h)
        hj = step(problem, t, j, s.h)
        C = V @ (fp - fm) / (2 * hj)
        S = V.abs() @ (fp - fm).abs() / (2 * hj)
        L, R = V @ (f0 - fm) / hj, V @ (fp - f0) / hj
        a = a_all[j:j + 1]
        if bool(((a - C).abs() > s.atol + s.rtol * S).any()):
            judge_element(problem, res, t, j, V, a, C, S, L, R, s)


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
            gen = rng.generator(n)
            picks = []
            for grp, _ in sorted(children, key=lambda c: -abs(c[1]))[:BEAM]:
                picks.append(int(grp[int(torch.randint(len(grp), (1,), generator=gen))]))
            return sorted(picks), True
        groups = children
    return sorted(int(grp[0]) for grp, _ in groups if len(grp) == 1), False
