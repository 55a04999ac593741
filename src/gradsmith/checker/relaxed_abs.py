"""A backward that is forward's gradient with each ``|d|`` relaxed: AdderNet's estimator.

AdderNet (Chen et al. 2020) computes ``-sum |W - X|`` in place of a product, and trains it with
the gradient of a smoother function: the full-precision difference ``X - W`` in place of
``sign(X - W)`` for the weights (the gradient of ``d ** 2 / 2``), rescaled to a fixed norm
(adaptive learning rate), and ``HardTanh(W - X)`` for the inputs (the gradient of the Huber
function). Backward then disagrees with finite differences everywhere, and the row was a
gradient-mismatch with nothing to declare (wageubn's ``Adder``, corpus 13b held-out, spent).

The signature: for a failing input, backward agrees (at the examined elements, up to one
positive factor for the input, the norm rescaling) with finite differences of forward run
with every ``abs`` replaced by ``d ** 2 / 2`` or by the Huber function: forward's own ops, with
only the kink relaxed. Forward must call ``abs`` for it to apply. A backward whose mismatch is
anything else stays a gradient-mismatch; this one stays an error too (undeclared-estimator),
with a template to complete, since only the user can write the rescaling they intend.

References:
    Chen, Wang, Xu, Shi, Xu, Xu, Tian, Xu: AdderNet: Do We Really Need Multiplications in Deep
    Learning?, CVPR 2020.
"""

from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode

from gradsmith.checker import substituted

ELEMENTS = 16  # elements compared, as for a substituted argument

#: The relaxations of ``|d|``, named by what backward uses in place of ``sign(d)``.
RELAXED = {
    "the full-precision difference d": lambda d: d * d / 2,
    "HardTanh(d)": lambda d: torch.where(d.abs() <= 1, d * d / 2, d.abs() - 0.5),
}

_ABS = {torch.abs, torch.Tensor.abs}


class _Relaxed(TorchFunctionMode):
    """Runs every ``abs`` as ``relax`` and counts the calls."""

    def __init__(self, relax):
        super().__init__()
        self.relax, self.calls = relax, 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in _ABS and args and isinstance(args[0], torch.Tensor) and not kwargs:
            self.calls += 1
            return self.relax(args[0])
        return func(*args, **(kwargs or {}))


def signature(session, res, v: torch.Tensor, a: torch.Tensor, tol: torch.Tensor,
              idx: torch.Tensor) -> tuple[str, float] | None:
    """``(what replaces sign(d), factor)`` when backward for input ``res.t`` is ``factor``
    (positive) times the gradient of forward with each ``abs`` relaxed, or None."""
    problem = session.problem
    if a.numel() < 2 or not problem.xs[res.t].is_floating_point():
        return None
    V = v.to(torch.float64)
    h = session.settings.h
    a, tol, idx = a[:ELEMENTS], tol[:ELEMENTS], idx[:ELEMENTS]
    for name, relax in RELAXED.items():
        mode, values = _Relaxed(relax), []
        try:
            with mode:
                for j in idx.tolist():
                    values.append(substituted.quotient(problem, problem.xs, res.t, j, h, V))
                    if mode.calls == 0:
                        return None  # forward calls no abs: nothing more to run
        except Exception:  # noqa: BLE001 - user code under the relaxation: not this one
            continue
        n = torch.tensor(values, dtype=torch.float64)
        norm = float(n @ n)
        if norm == 0.0 or not bool(torch.isfinite(n).all()):
            continue
        factor = float(a @ n) / norm
        if factor > 0 and bool(((a - factor * n).abs() <= tol).all()):
            return name, factor
    return None
