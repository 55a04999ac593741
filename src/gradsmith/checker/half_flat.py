"""Finite differences of a half-precision Function's forward taken in float64 (private).

A Function written for bfloat16 (corpus 12d held-out: lingua's ``Fp8LinearFn``, an FP8 matmul
whose backward is the plain linear map) is checked in bfloat16, where the finite-difference
step is coarse: across several FP8 levels, the secant of a quantised forward is the slope of
the linear map it rounds, give or take a level, and the straight-through backward disagreed
with it at a few elements: a gradient-mismatch, not the estimator it is. The estimator
signature (finite differences exactly 0 where backward disagrees) is read where it exists: at
a float64 step, on float64 copies of the inputs, when forward runs in float64 (only backward
mixed dtypes there). A forward that moves at that step gives the same kind of numbers the
bfloat16 check gave, and nothing changes for it; the finding stays an error either way.
"""

from __future__ import annotations

import torch

from gradsmith.checker import numerics
from gradsmith.checker.problem import Problem

_HALF = (torch.bfloat16, torch.float16)


def float64_differences(problem: Problem, t: int, idx: torch.Tensor, v: torch.Tensor,
                        h: float) -> torch.Tensor | None:
    """``v``-projected central differences of forward at the elements ``idx`` of input ``t``,
    on float64 copies of the inputs; None when input ``t`` is no half type, forward raises in
    float64, or any difference is not finite."""
    if problem.xs[t].dtype not in _HALF:
        return None
    xs = [x.to(torch.float64) if x.is_floating_point() else x for x in problem.xs]
    wide = Problem(problem.f, xs, problem.labels)
    V = v.to(torch.float64).reshape(-1)
    cols = []
    try:
        for j in idx.tolist():
            fp, fm = numerics.pair(wide, t, j, h)
            if fp.numel() != V.numel():
                return None
            cols.append(float(V @ (fp - fm)) / (2 * numerics.step(wide, t, j, h)))
    except Exception:  # noqa: BLE001 - user code: the bfloat16 numbers stand
        return None
    n = torch.tensor(cols, dtype=torch.float64)
    return n if bool(torch.isfinite(n).all()) else None
