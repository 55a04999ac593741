"""A first verdict from a few random directions, before element-by-element differences.

Exact mode (:func:`gradsmith.checker.numerics.exact`) spends two forward passes per input
element; on a correct Function nearly all of them only confirm what a handful of directional
derivatives already shows. So every input moves at once along a few random directions ``u``
(signs and magnitudes in [0.5, 1.5] drawn per element) and ``sum_t <J_t^T v, u_t>`` (from the
backward passes already made) is compared with a Richardson-extrapolated central difference
of ``v^T f`` along ``u``, for every ``v`` on the same forward passes: four per direction.

The screen only ever *passes* a problem; anything else falls back to the element-by-element
comparison, so a failure reads exactly as before. It passes when every projection agrees
within a tolerance derived from the measured finite-difference noise that is also at most
half of ``atol``: a single element off by more than exact mode's ``atol + rtol * |.|``
moves a projection by more than half of that (every ``|u_j| >= 0.5``), so it cannot pass.
Several wrong elements could cancel only on a set of directions of measure zero. A NaN, a
step crossing a kink, a noisy (float32) forward or elements beyond
:data:`~gradsmith.checker.numerics.RELATIVE_FROM` (a relative step) fail the screen and get
the full comparison, kink rule and larger-step retries included.
"""

from __future__ import annotations

import torch

from gradsmith.checker import rng
from gradsmith.checker.numerics import RELATIVE_FROM, InputResult, Settings
from gradsmith.checker.problem import Problem

DIRECTIONS = 2


def screened(problem: Problem, vs: list[torch.Tensor], grads: list[list[torch.Tensor]],
             s: Settings, seed: int) -> list[InputResult] | None:
    """Passing results for every input of ``problem`` (mode ``"screen"``), or None when a
    direction disagrees or cannot decide (then compare element by element)."""
    xs = problem.xs
    if not xs or any(not bool(torch.isfinite(x).all()) or bool((x.abs() > RELATIVE_FROM).any())
                     for x in xs):
        return None
    G = [[g.to(torch.float64) for g in per_v] for per_v in grads]
    if not all(bool(torch.isfinite(g).all()) for per_v in G for g in per_v):
        return None
    V = torch.stack(vs).to(torch.float64)                      # (k, m)
    f0 = problem.value().to(torch.float64)
    if not bool(torch.isfinite(f0).all()):
        return None
    scale_f = V.abs() @ f0.abs()                               # (k,)
    gen = rng.generator(seed)
    for _ in range(DIRECTIONS):
        us = [(torch.randint(0, 2, x.shape, generator=gen, dtype=torch.int8) * 2 - 1).to(
            torch.float64) * (0.5 + torch.rand(x.shape, generator=gen, dtype=torch.float64))
              for x in xs]
        analytic = torch.stack([sum((g * u).sum() for g, u in zip(per_v, us)) for per_v in G])
        floor = 1e3 * s.eps * torch.stack(
            [sum((g * u).abs().sum() for g, u in zip(per_v, us)) for per_v in G])
        d1 = _directional(problem, us, V, s.h)
        d2 = _directional(problem, us, V, s.h / 2)
        numerical = (4 * d2 - d1) / 3
        tol = 10 * (d1 - d2).abs() + 50 * s.eps * scale_f / s.h + floor
        if not (bool(torch.isfinite(numerical).all()) and bool((tol <= s.atol / 2).all())
                and bool(((analytic - numerical).abs() <= tol).all())):
            return None
    return [InputResult(t, problem.labels[t], "screen") for t in range(len(xs))]


def _directional(problem: Problem, us: list[torch.Tensor], V: torch.Tensor,
                 h: float) -> torch.Tensor:
    """``V (f(x + h u) - f(x - h u)) / 2h``, every input moved at once."""
    plus = [x + (h * u).to(x.dtype) for x, u in zip(problem.xs, us)]
    minus = [x - (h * u).to(x.dtype) for x, u in zip(problem.xs, us)]
    fresh = frozenset(range(len(plus)))
    fp = problem.value(plus, fresh).to(torch.float64)
    fm = problem.value(minus, fresh).to(torch.float64)
    return V @ (fp - fm) / (2 * h)
