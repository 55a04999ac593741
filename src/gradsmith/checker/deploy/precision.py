"""``precision``: the Function in float32 (and in the user's dtype) against float64.

The eager checks run in float64, where a naive formula (``(1 - cos x) / x**2``,
``E[x^2] - E[x]^2``) is exact enough; in float32 it can lose every digit. Here the Function runs
at the float32-rounded inputs and is compared with its own float64 evaluation at *the same*
(rounded) inputs, so only the Function's arithmetic is measured, not the rounding of the
inputs. Errors are normwise per tensor (``max |got - want| / max |want|``); tolerances are
JAX's ``check_grads`` table (float32 2e-3, float16 1e-2, bfloat16 1e-1). Beyond 10x the
tolerance (or NaN/inf where float64 is finite) the digits are gone: an error, unless the
outputs agree in magnitude and differ only in signs (vectors defined up to sign, which each
precision picks for itself): then there is no common reference and the check does not apply.
"""

from __future__ import annotations

import torch

from gradsmith.checker.deploy._common import (
    describe,
    evaluate,
    first_line,
    is_random,
    mismatches,
    relative_error,
)
from gradsmith.checker.report import Finding
from gradsmith.checker.session import Session, Skip

NAME = "precision"
#: JAX ``jax._src.public_test_util.default_gradient_tolerance``.
TOLERANCE = {torch.float32: 2e-3, torch.float16: 1e-2, torch.bfloat16: 1e-1}
LOST = 10.0


def dtypes(session: Session) -> list[torch.dtype]:
    """float32, plus the user's dtype when it is another reduced-precision float."""
    found = [torch.float32]
    for t in session.subject.args.originals:
        if t.dtype in TOLERANCE and t.dtype not in found:
            found.append(t.dtype)
    return found


def run(session: Session) -> list[Finding]:
    if session.subject.dtype != torch.float64:
        raise Skip("the Function does not run in float64, so it was checked in "
                   f"{_name(session.subject.dtype or session.subject.args.originals[0].dtype)} "
                   "directly (see the setup findings)")
    if is_random(session):
        raise Skip("the Function draws random numbers, and float32 and float64 draw different "
                   "ones from the same seed: no common reference")
    findings = []
    for dtype in dtypes(session):
        findings += _one(session, dtype)
    return findings


def _one(session: Session, dtype: torch.dtype) -> list[Finding]:
    label = _name(dtype)
    try:
        got = evaluate(session, dtype=dtype)
    except Exception as exc:  # noqa: BLE001
        return [Finding(
            "precision-error", "warning",
            f"the Function raises in {label} ({first_line(exc)}) although it runs in float64",
            "create internal tensors with the input's dtype (torch.zeros_like(x), "
            "dtype=x.dtype) instead of a hard-coded dtype", NAME,
            details={"dtype": label, "exception": type(exc).__name__})]
    # The float64 reference at the rounded inputs, with the rounded cotangents.
    rounded = [x.detach().to(dtype).to(torch.float64).requires_grad_(True)
               for x in session.subject.base()]
    want = evaluate(session, xs=rounded)
    tol = TOLERANCE[dtype]
    bad = mismatches(session, got, want, tol)
    if not bad:
        return []
    lost = [b for b in bad if not b[2] <= LOST * tol]
    if lost and _signs_only(session, got, want, tol):
        raise Skip(f"in {label} the outputs agree with float64 only up to signs (singular or "
                   "eigen vectors, whose sign each precision picks for itself): a sign gauge, "
                   "not lost digits, and no common reference for gradients through them")
    if lost:
        return [Finding(
            "precision-loss", "error",
            f"in {label} the Function loses its accuracy: {describe(lost)} against its own "
            f"float64 result at the same inputs (tolerance {tol:g})",
            "rewrite the cancelling step in a stable form (expm1/log1p, "
            "(1 - cos x) = 2 sin(x/2)**2, x - mean before squaring, logsumexp with the max "
            "subtracted), or compute that step in float64 / float32 accumulation and cast back",
            NAME, lost[0][1], details={"dtype": label, "mismatches": [list(b) for b in bad]})]
    return [Finding(
        "precision-degraded", "warning",
        f"in {label} the Function is less accurate than {label} allows: {describe(bad)} "
        f"against its own float64 result at the same inputs (tolerance {tol:g})",
        "look for a subtraction of nearly equal values or a long reduction in low precision; "
        "accumulate in float32 (or float64) and cast back", NAME, bad[0][1],
        details={"dtype": label, "mismatches": [list(b) for b in bad]})]


def _signs_only(session: Session, got, want, tol: float) -> bool:
    """Some output differs beyond tolerance while its magnitudes agree elementwise: the two
    precisions chose different signs for vectors defined up to sign (a flat block-sparse
    ``U`` of an SVD, where :mod:`gradsmith.checker.gauge` sees no matrix to align)."""
    flipped = False
    for a, b in zip(got.outs, want.outs):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)) or \
                a.shape != b.shape or not a.numel():
            continue
        a, b = a.detach().to(torch.float64), b.detach().to(torch.float64)
        if relative_error(a, b) <= tol:
            continue
        if relative_error(a.abs(), b.abs()) > tol:
            return False  # digits lost, not only signs
        flipped = True
    return flipped


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
