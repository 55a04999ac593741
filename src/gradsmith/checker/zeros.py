"""Backward at all-zero inputs: a crash where forward runs (issue 18).

Random inputs never sit exactly at zero, so a backward branch written for it (``if
angle2[i] < 1e-12:`` in an axis-angle rotation, a zero-initialised motion) is never run by the
gradient checks, and a bug there (indexing a 0-d tensor) ships: SQPDNet's ``Se3aa`` PASSed. Here
every floating input the gradients are taken for is set to zero; where forward runs and its outputs are
finite, backward must not raise a programming error (``IndexError``, ``TypeError``, a shape
error). A division by zero, a singular solve, NaN or inf at zero say nothing: the derivative may
not exist there (``sqrt``, ``x / |x|``). Stand-ins gradsmith invented are left alone.
"""

from __future__ import annotations

import torch

from gradsmith.checker.explain import describe, user_frame
from gradsmith.checker.extremes import finite_forward, invented_args
from gradsmith.checker.report import Finding
from gradsmith.checker.session import Session

#: Exceptions a backward raises at zero because of a bug in a branch, not a missing derivative.
_BUGS = (IndexError, TypeError, KeyError, AttributeError, UnboundLocalError, NameError)
_SHAPE_WORDS = ("size mismatch", "invalid for input of size", "must match the size",
                "shape mismatch", "expected a 1-element", "invalid index", "out of bounds")


def findings(session: Session, base: list[torch.Tensor], grads: list[torch.Tensor],
             check: str) -> list[Finding]:
    """A ``backward-error-at-zero`` finding when backward raises a programming error at
    all-zero floating inputs where forward runs and is finite; else nothing."""
    from gradsmith.checker.robustness import forward_backward

    if invented_args(session):
        return []
    zero = [torch.zeros_like(x) if x.is_floating_point() else x for x in base]
    if all(z is x for z, x in zip(zero, base)) or not finite_forward(session, zero):
        return []  # nothing floating, or zero is outside forward's domain: nothing to say
    leaves = [x.clone().requires_grad_(True) for x in zero]
    try:
        forward_backward(session, [x.clone() for x in leaves], leaves, grads)
    except Exception as e:  # noqa: BLE001 - user code: judged below
        if not _bug(e):
            return []
        where = describe(user_frame(e))
        return [Finding(
            "backward-error-at-zero", "error",
            f"backward raises {type(e).__name__} at all-zero inputs, where forward runs and is "
            f"finite: {str(e).splitlines()[0][:200] if str(e) else type(e).__name__}{where}. A "
            "branch for the zero case (a zero rotation, a zero-initialised parameter) is never "
            "reached by random inputs, and crashes when training reaches it",
            "run backward by hand with zero inputs and fix the branch that handles them",
            check, None, {"exception": type(e).__name__})]
    return []


def _bug(e: Exception) -> bool:
    if isinstance(e, _BUGS):
        return True
    text = str(e)
    return isinstance(e, RuntimeError) and not isinstance(
        e, torch.linalg.LinAlgError) and any(w in text for w in _SHAPE_WORDS)
