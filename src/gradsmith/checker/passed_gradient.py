"""A backward that hands grad_output back unchanged where forward is no identity.

``torch.log(x)`` forward, ``return grad_output`` backward (DeepShift's ``LogFunction``,
``AbsFunction``; corpus 13b held-out, issue 18): the straight-through estimator of a
*differentiable* op, written on purpose in modules of STE helpers, and a product whose second
factor gets the gradient as if it were added (``g * b`` for ``a``, ``g`` for ``b``: a sign path
trained straight through). The estimator signatures read a piecewise-constant forward (finite
differences 0) or an identity forward; here finite differences are forward's true, non-zero
derivative, so the input kept its bare gradient-mismatch and got no declaration at all.

The pattern is exact and cheap to read from the comparison already made: backward equals the
incoming gradient's own element at every examined element (the same tensor, not a multiple),
while finite differences differ from it. A forgotten derivative looks the same, so the
finding keeps the Function failing; what changes is that it says so and prints the
declaration (``surrogate=lambda x: x``), checked against backward like every other.
"""

from __future__ import annotations

import torch

from gradsmith.checker.estimator_signature import Signature


def signature(problem, res, v, a, n, tol, idx, full=None) -> Signature | None:
    """A ``passed-through`` signature for input ``res.t``: backward ``a`` equals one
    output's part of ``v`` (summed down to the input's shape where forward broadcast it) at
    every examined element (at least two of them non-zero) and, where backward's whole
    gradient ``full`` is given, at every element (a mask that drops a term elsewhere,
    ``g * ~sentinel``, is a wrong gradient, not a pass-through), finite differences ``n`` do
    not somewhere; None otherwise."""
    x = problem.xs[res.t]
    if a.numel() < 2 or not bool(((a - n).abs() > tol).any()) or _constant_ratio(a, n, tol):
        return None
    for k, piece in enumerate(problem.split(v)):
        if piece.shape != x.shape:  # an input broadcast in forward: its gradient summed down
            try:
                piece = piece.sum_to_size(x.shape)
            except RuntimeError:
                continue
        up = piece.reshape(-1).to(torch.float64)[idx]
        whole = full is None or (full.numel() == piece.numel() and bool(
            ((full.reshape(-1).to(torch.float64) - piece.reshape(-1).to(torch.float64)).abs()
             <= _largest(tol)).all()))
        if int((up.abs() > tol).sum()) >= 2 and whole and bool(((a - up).abs() <= tol).all()):
            return Signature(res.t, res.label, "passed-through", total=a.numel(), output=k)
    return None


def describe(sig: Signature) -> str:
    """The pattern in words (see :func:`gradsmith.checker.estimator_signature.describe`)."""
    return (f"{sig.label}: backward returns the incoming gradient unchanged at all {sig.total} "
            "elements examined while forward is no identity in it (finite differences give "
            "its true, different derivative): the straight-through estimator of a "
            "differentiable op (log, abs, a product's factor passed the gradient as if added), "
            "or a forgotten derivative")


def _constant_ratio(a: torch.Tensor, n: torch.Tensor, tol: float) -> bool:
    """Finite differences a constant multiple of backward (``x * 2`` forward, ``g`` back): a
    forgotten constant factor, the commonest wrong formula, not an estimator of a
    differentiable op, whose true derivative varies from element to element (1/x, sign x)."""
    big = a.abs() > tol
    if int(big.sum()) < 2:
        return False
    ratio = n[big] / a[big]
    return bool((ratio - ratio[0]).abs().max() <= 1e-3 * ratio[0].abs().clamp_min(1e-12))


def _largest(tol) -> float:
    """One tolerance for every element: the largest of the examined elements' own."""
    return float(tol.max()) if isinstance(tol, torch.Tensor) else float(tol)
