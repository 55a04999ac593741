"""A quantizer whose scale is computed from its input: piecewise constant up to that scale.

Ternary and binary weight quantizers (TWN, XNOR: ``alpha * sign(w)`` with ``alpha`` the mean
of the kept ``|w|``, per row or per tensor) are not flat: moving one element moves ``alpha``,
so finite differences are not 0 where a straight-through backward passes the gradient, and
the straight-through signature (:mod:`gradsmith.checker.estimators`) missed them (BiBERT's
TwnQuantizer, corpus 5 dev: a gradient-mismatch with no declaration). The signature here:
moving any examined element changes forward's output only by rescaling it, every output
element that changes is multiplied by one common factor, the moved element's own output
included. A smooth forward fails it (``x * mean(x)``: the moved element's own output changes
by ``h * mean`` more than the others' share); so does a clamp or any forward whose moved
element's own output follows it, and an element-wise forward (one element of each output
changes: a factor needs a group within an output to be common).
"""

from __future__ import annotations

import torch

from gradsmith.checker import numerics, spread
from gradsmith.checker.estimator_signature import Signature
from gradsmith.checker.problem import Problem
from gradsmith.checker.session import Session

SAMPLE = 16  # elements moved (of those the gradients check examined)
RATIO_RTOL = 1e-5  # a common factor agrees to float rounding (1e-10), a smooth one by O(1)


def signature(session: Session, problem: Problem, t: int, label: str, a: torch.Tensor,
              idx: torch.Tensor) -> Signature | None:
    """A ``straight-through-rescaled`` signature of input ``t``, or None."""
    # one value per output element (a weight, not the scale itself: moving a scalar step
    # rescales every output, and that is its true derivative)
    if a.numel() == 0 or not bool((a != 0).any()) or t not in spread.elementwise(problem):
        return None
    try:
        base = problem.value().to(torch.float64)
    except Exception:  # noqa: BLE001 - user code; the gradients check reported it
        return None
    rescaled = 0
    for j in idx.tolist()[:SAMPLE]:
        for moved in numerics.pair(problem, t, j, session.settings.h):
            found = _common_factor(moved.reshape(-1) - base, base, problem.out_shapes)
            if found is None:
                return None
            rescaled += found
    return (Signature(t, label, "straight-through-rescaled", total=min(SAMPLE, idx.numel()))
            if rescaled >= 2 else None)


def _common_factor(change: torch.Tensor, base: torch.Tensor, shapes) -> bool | None:
    """True when ``change`` is one common multiple of ``base`` where it is not 0, False when
    nothing changed, None when the change is no rescaling."""
    changed = change.abs() > 1e-12 * (1 + base.abs())
    if not bool(changed.any()):
        return False
    # one element alone always has one factor (an element-wise forward, also one element in
    # each of several outputs: ``(x.clone(), 2 * x)``): a scale is shared within an output
    counts = [int(c.sum()) for c in changed.split([s.numel() for s in shapes])]
    if max(counts) < 2 or bool((base[changed] == 0).any()):
        return None
    ratio = change[changed] / base[changed]
    spread = float((ratio - ratio[0]).abs().max())
    return True if spread <= RATIO_RTOL * float(ratio.abs().max()) else None
