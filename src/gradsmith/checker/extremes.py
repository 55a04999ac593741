"""Backward at inputs of large magnitude: NaN/inf where forward is finite (issue 18).

Matterhorn's ``_heaviside_sigmoid`` (a spike's sigmoid surrogate computed as ``e / (1 + e)**2 /
a`` with ``e = exp(-x / a)``) is right on the small inputs a check draws, and NaN once
``exp`` overflows (``x / a`` below -709 in float64, -88 in float32): a strongly negative
membrane potential poisons training. A declared surrogate (``torch.sigmoid(x / a)``) is
compared where the inputs are, so pasting the line gradsmith printed made that Function PASS.
Here every floating input that requires grad is scaled by :data:`SCALE` (the example's own
pattern, hundreds in magnitude); where forward stays finite there, backward must too. Run
with the robustness check, whatever is declared; forward raising or non-finite at that scale
says nothing (its domain), and nothing is reported; nor where an argument is a stand-in
gradsmith invented (a function only backward calls, a config object).
"""

from __future__ import annotations

import torch

from gradsmith.checker.report import Finding
from gradsmith.checker.session import Session

SCALE = 300.0


def findings(session: Session, base: list[torch.Tensor], grads: list[torch.Tensor],
             check: str) -> list[Finding]:
    """``nan-gradient-at-scale`` findings (one per input) for backward at ``SCALE`` times the
    example inputs ``base`` with incoming gradients ``grads``."""
    from gradsmith.checker.robustness import forward_backward

    subject = session.subject
    if invented_args(session):
        return []  # a function or object gradsmith invented: its behaviour at scale is ours
    big = [x * SCALE if x.is_floating_point() else x for x in base]
    if not finite_forward(session, big):
        return []  # outside forward's domain: nothing to say about backward there
    leaves = [x.detach().clone().requires_grad_(True) for x in big]
    try:
        _, got = forward_backward(session, [x.clone() for x in leaves], leaves, grads)
    except Exception:  # noqa: BLE001 - raising at that scale is forward's domain, not a finding
        return []
    declared = _declared_at(session, big, grads)
    found = []
    for i, (label, x, g) in enumerate(zip(subject.labels, big, got)):
        if g is None or not g.is_floating_point() or bool(torch.isfinite(g).all()):
            continue
        nonfinite = ~torch.isfinite(g)
        if declared is not None and declared[i].shape == g.shape:
            # the declared gradient is itself infinite there (an unbounded exp surrogate):
            # backward computes what was declared, no intermediate overflows
            nonfinite &= torch.isfinite(declared[i])
            if not bool(nonfinite.any()):
                continue
        bad = nonfinite.nonzero()
        at = float(x[tuple(bad[0])]) if x.dim() else float(x)
        found.append(Finding(
            "nan-gradient-at-scale", "error",
            f"gradient for {label} is NaN/inf at {len(bad)} of {g.numel()} elements when the "
            f"inputs are {SCALE:g} x the example's (e.g. at {label} = {at:.4g}), where forward "
            "is finite: an intermediate overflows (exp(-x / a) in e / (1 + e)**2, x**2 in a "
            "norm), and training on such inputs gets NaN",
            "compute backward in a stable form (torch.sigmoid(z) * (1 - torch.sigmoid(z)) "
            "instead of exp(-z) / (1 + exp(-z))**2; torch.where on a safe value; rescale "
            "before squaring)", check, label, {"scale": SCALE, "count": len(bad)}))
    return found


def _declared_at(session: Session, big: list[torch.Tensor],
                 grads: list[torch.Tensor]) -> list[torch.Tensor] | None:
    """The declared surrogate's or intended gradients at the scaled inputs, or None (nothing
    declared, or the declaration raises there)."""
    from gradsmith.checker.declared import declared_kind, reference

    if declared_kind(session) is None:
        return None
    try:
        return reference(session)([x.clone() for x in big], grads)
    except Exception:  # noqa: BLE001 - user code: then backward alone is judged
        return None


def invented_args(session: Session) -> bool:
    """Whether an argument is a stand-in gradsmith invented (see :func:`_invented`)."""
    return any(_invented(v) for v in getattr(session.subject.args, "_leaves", ()))


def finite_forward(session: Session, xs: list[torch.Tensor]) -> bool:
    """Whether forward runs on the differentiated inputs ``xs`` and its floating outputs are
    finite there (False where it raises: outside its domain)."""
    subject = session.subject
    try:
        with torch.no_grad():
            outs = subject.select(subject.call([x.clone() for x in xs]))
    except Exception:  # noqa: BLE001 - user code outside its domain
        return False
    return bool(outs) and all(bool(torch.isfinite(o).all()) for o in outs
                              if o.is_floating_point())


def _invented(value: object) -> bool:
    """A stand-in zero-configuration inputs invented (a config object, an operator, a
    function only backward calls): what it does at hundreds of times its inputs (a ``tanh``
    saturating, an event never crossed) is gradsmith's invention, not the Function's."""
    from gradsmith.checker.invented import is_invented, synthetic_function

    return is_invented(value) or synthetic_function(value)
