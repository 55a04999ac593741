"""Elements whose finite difference crossed a jump of forward (private).

A piecewise-constant forward (a ternary quantizer with a data-dependent threshold, corpus 12b
held-out: mase's ``Ternary``) has finite differences exactly 0 almost everywhere, and a jump
divided by the step where an element sits within the step of a threshold. The gradients check
re-judges only its first few disagreeing elements (a jump among them is no mismatch); the
rest of 119 disagreeing elements stay mismatches, and one jump among them hid the
straight-through signature of the other 118 (exactly 0 where backward passes the gradient):
a gradient-mismatch beside the estimator the other input set showed. Here, on the estimator
path only, an element that is not flat where backward disagrees is looked at again at an
eighth of the step: a derivative makes the difference of forward's values shrink about eight
times; a jump leaves it as large (the threshold is still inside the smaller step) or makes it
exactly 0 (it is not: forward is flat around the element). Those elements are left out of the
signature, as the kinks are. At most :data:`MAX_ASKED` elements are asked:
more non-flat disagreements than that is no straight-through pattern.
"""

from __future__ import annotations

import torch

from gradsmith.checker import numerics
from gradsmith.checker.problem import Problem

MAX_ASKED = 8


def without_jumps(problem: Problem, t: int, v: torch.Tensor, a, n, tol, idx, settings):
    """``(a, n, tol, idx)`` without the elements where forward jumps within the step."""
    big = float(a.abs().max()) if a.numel() else 0.0
    flat = n.abs() <= 1e-12 + 1e-9 * big
    asked = torch.nonzero(((a - n).abs() > tol) & ~flat).reshape(-1).tolist()
    if not asked or len(asked) > MAX_ASKED or not bool(flat.any()):
        return a, n, tol, idx
    V = v.reshape(-1).to(torch.float64)
    drop = [k for k in asked if _jumps(problem, t, int(idx[k]), V, float(n[k]), settings.h)]
    if not drop:
        return a, n, tol, idx
    keep = torch.ones(a.numel(), dtype=torch.bool)
    keep[drop] = False
    return a[keep], n[keep], tol[keep], idx[keep]


def _jumps(problem: Problem, t: int, j: int, V: torch.Tensor, quotient: float, h: float) -> bool:
    fp, fm = numerics.pair(problem, t, j, h / 8)
    small = float(V @ (fp - fm))  # the difference itself, not divided by the step
    if not torch.isfinite(torch.tensor(small)):
        return False
    large = quotient * 2 * numerics.step(problem, t, j, h)
    return small == 0 or abs(small) >= 0.5 * abs(large)

