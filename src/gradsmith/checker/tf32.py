"""float32 calibration for products computed in TF32 (natively on a CUDA GPU).

On NVIDIA GPUs since Ampere, Triton's ``tl.dot`` rounds float32 operands to TF32 (10 explicit
mantissa bits) unless the code asks for IEEE float32 (:mod:`gradsmith._triton.dots`), and so do
torch's CUDA matmuls where ``torch.backends.cuda.matmul.allow_tf32`` is set. A correct kernel's
float32 gradient then differs from float64's by about 1e-3 relative, and a finite-difference step
at float32's calibration (h ~ 1e-2) moves an input by a few TF32 spacings only: on an H200,
attorch's linear layer got a 19 % "gradient-mismatch" that way. The calibration applies only
where TF32 really ran: a native launch of such a kernel (or a TF32 torch matmul on CUDA inputs)
in the first forward and backward, with the check in float32 (the inputs' dtype, or the
precision the kernels were found to compute in). float64 checks and CPU or interpreted runs
are never loosened.

Only inputs whose gradient passes through a TF32 operand are widened (measured per input by
:mod:`gradsmith.checker.tf32_inputs`: forward rounds the input to TF32, or backward rounds the
incoming gradient); the others (a bias's ``g.sum(0)``) keep float32's step and rtol
(:func:`for_input`). With ``u = 2**-11`` (TF32's unit roundoff), ``K`` the length of the sums
the input's gradient elements take (the outputs one element reaches, bounded below by the
outputs' and the other inputs' dimensions, not the batch or forward's reduction) and
``m = max |x|`` of that input:

- step ``h = 2 * (2u)**(1/3)`` (~0.2), the optimum for a forward rounded at ``2u``;
- ``rtol = 12 u sqrt(K) + 2 u (m + h) / h``: operand rounding in forward and in backward
  (``2u`` per product, ``u`` for the other operand: ``3u``), summed over ``K`` terms
  (``sqrt(K)``: random signs), with a safety factor of 4; plus, where forward rounds the input,
  the step's own rounding to TF32 (``x +- h`` each land up to ``u (|x| + h)`` off, a bound,
  relative to ``2h``), doubled.

Other checks keep the largest of these rtols.

A wrong factor (2) or a transposed operand is off by O(1) and still fails; errors below
``rtol`` cannot be told from TF32 rounding by finite differences, which the note says.

With ``reference=``, the reference's run at the Function's own precision (whose distance from
float64 sets the tolerance) runs with TF32 CUDA matmuls too (:func:`like_the_function`): an
honest TF32 implementation's error, not IEEE float32's, which a correct kernel exceeds 1e4-fold.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

import torch

from gradsmith.checker import tf32_inputs
from gradsmith.checker.report import Finding
from gradsmith.checker.session import Session

#: TF32's unit roundoff: 10 explicit mantissa bits, round to nearest.
UNIT = 2.0 ** -11
SAFETY = 4.0


def launches() -> int:
    """Native TF32 kernel launches so far (a mark to compare with after the first forward)."""
    from gradsmith._triton import tf32_launches

    return tf32_launches()[0]


def calibrate(session: Session, before: int) -> None:
    """Widen step and rtol for TF32 when it ran since ``before`` (a :func:`launches` mark)
    and the check is in float32, for the inputs whose gradient passes through a TF32 operand
    (:mod:`gradsmith.checker.tf32_inputs`); add the precision note saying how."""
    why = _where(session, before)
    if why is None:
        return
    s = session.settings
    problem = session.subject.problem()
    h = 2 * (2 * UNIT) ** (1 / 3)
    try:
        readings = tf32_inputs.read(problem, h, session.generator(61))
    except Exception:  # noqa: BLE001 - user code; unreadable: every input as TF32, K bounded
        readings = [tf32_inputs.Reading(True, True, max([1, *x.shape, *(
            d for o in problem.out_shapes for d in o)])) for x in problem.xs]
    per_input = {}
    for t, (x, r) in enumerate(zip(problem.xs, readings)):
        if not r.tf32:
            continue
        largest = float(x.abs().max()) if x.numel() else 1.0
        rtol = SAFETY * 3 * UNIT * math.sqrt(r.reduction)
        if r.forward:  # x +- h land on TF32 values up to u (|x| + h) off
            rtol += 2 * UNIT * (largest + h) / h
        per_input[t] = {"label": problem.labels[t], "reduction": r.reduction,
                        "max_abs": largest, "rtol": rtol, "forward": r.forward,
                        "backward": r.backward}
    if not per_input:
        return
    session.cache["tf32"] = {"h": s.h, "rtol": s.rtol, "inputs": per_input}
    s.h = max(s.h, h)
    if not session.options.user_tolerance:
        s.rtol = max([s.rtol, *(p["rtol"] for p in per_input.values())])
    widened = "; ".join(
        f"{p['label']}: K <= {p['reduction']}, rtol={p['rtol']:.2g}"
        f"{'' if p['forward'] else ' (TF32 in backward only)'}" for p in per_input.values())
    plain = [lbl for t, lbl in enumerate(problem.labels) if t not in per_input]
    report = session.report
    report.findings = [f for f in report.findings if f.code != "low-precision-numerics"]
    report.findings.append(Finding(
        "low-precision-numerics", "info",
        f"natively on CUDA, {why} rounds float32 operands to TF32 (10-bit mantissa, unit "
        "roundoff 2^-11) before multiplying: a correct gradient differs from float64's by "
        f"~1e-3 relative. Finite differences use step {s.h:.2g}, and rtol = 12u*sqrt(K) + "
        "2u*(max|x| + h)/h (u=2^-11; the second term where forward rounds the input to TF32) "
        "for the inputs whose gradient passes through a TF32 operand, K the length of the "
        f"sums their gradient elements take: {widened}"
        + (f"; {', '.join(plain)} keep float32's rtol={session.cache['tf32']['rtol']:.2g} "
           "(no TF32 operand on their gradient's path)" if plain else "")
        + "; gradient errors below that cannot be told from TF32 rounding here, a wrong factor "
        "or operand still fails. float64 checks and CPU runs are not loosened",
        "to check at full float32 precision, run the check with TRITON_F32_DEFAULT=ieee (or "
        "input_precision=\"ieee\" in tl.dot), or pass reference= (plain PyTorch of the same "
        "inputs)", "setup",
        details={"computes_in": "tf32",
                 "reduction": max(p["reduction"] for p in per_input.values()),
                 "max_abs": max(p["max_abs"] for p in per_input.values()),
                 "h": s.h, "rtol": s.rtol, "unit_roundoff": UNIT,
                 "inputs": {p["label"]: {k: p[k] for k in ("reduction", "rtol", "forward")}
                            for p in per_input.values()}}))


@contextmanager
def for_input(session: Session, t: int) -> Iterator[None]:
    """The first-order comparison of input ``t`` with its own TF32 tolerance, or float32's
    step and rtol where its gradient passes through no TF32 operand; restored afterwards."""
    tf32 = session.cache.get("tf32")
    s = session.settings
    if not tf32 or session.options.user_tolerance:
        yield
        return
    saved = s.h, s.rtol
    mine = tf32["inputs"].get(t)
    if mine is None:
        s.h, s.rtol = tf32["h"], tf32["rtol"]
    else:
        s.rtol = mine["rtol"]
    try:
        yield
    finally:
        s.h, s.rtol = saved


@contextmanager
def like_the_function(session: Session) -> Iterator[None]:
    """CUDA matmuls in TF32 inside, where the Function's products ran in TF32 (else nothing
    changes); the flag is restored."""
    if not session.cache.get("tf32"):
        yield
        return
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def _where(session: Session, before: int) -> str | None:
    """What ran in TF32 (for the note), or None where TF32 does not apply."""
    if session.settings.eps != torch.finfo(torch.float32).eps:
        return None  # float64 (or lower than float32): TF32 is not what limits it
    from gradsmith._triton import tf32_launches

    count, names = tf32_launches(since=before)
    if count > before:
        return f"tl.dot in its Triton kernels ({', '.join(names[:3])})"
    cuda = any(x.is_cuda for x in session.subject.base())
    if cuda and torch.backends.cuda.matmul.allow_tf32:
        return "torch's matmuls (torch.backends.cuda.matmul.allow_tf32 is set)"
    return None
