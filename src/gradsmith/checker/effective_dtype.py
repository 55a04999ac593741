"""The precision a Function really computes in, which may be lower than the dtype it is handed.

Fused kernels (Triton, CUDA) load whatever they are given, compute in float32 and store in the
output's dtype. Handed float64, they return float64 tensors holding float32 values, and a
float64 finite difference at step 1e-6 is then off by up to 10% (or exactly 0, a "piecewise
constant" forward): every verdict would be gradsmith's own artifact. The signature is exact and
cheap: every output value of such a Function is representable in float32 although its inputs
are not, while a float64 computation on random float64 inputs lands on a float32 value with
probability ~2^-29 per element. Outputs that are integers (rounding, counting) or short dyadic values say
nothing about precision and are left out, and so are outputs on one fixed dyadic grid
(a 1,024-level quantizer, a 16-step bisection of [-2, 2]) when the grid explains them in fewer
bits than the dtype: a dtype rounds relative to each value, so its small values carry finer bits
than its large ones, while a grid gives every value the same last bit. Taking such a forward for
a float16 kernel calibrated the check to float16 and let a wrong backward pass. The test is made
for the half-precision candidates only (see ``computed_dtype``).
"""

from __future__ import annotations

import math

import torch

from gradsmith.checker.report import Finding
from gradsmith.checker.session import Session

# Coarsest first: the lowest precision in which every output value is exact.
_CANDIDATES = (torch.bfloat16, torch.float16, torch.float32)
# Short dyadic values (multiples of 1/256: 0.5, 0.75, ...) are exact in every dtype and come
# out of float64 code too (means of integers, halves); one other value is evidence enough
# (a scalar loss has only one).
_SHORT = 256


def computed_dtype(session: Session, outs: list[torch.Tensor]) -> torch.dtype | None:
    """The dtype the forward really computed ``outs`` in, when below their float64; else None.

    Args:
        session: the check's session (its inputs show whether float64 went in).
        outs: the differentiable outputs of the first float64 forward.
    """
    if session.subject.dtype != torch.float64:
        return None
    subject = session.subject
    base = [x.detach() for x in subject.base()]
    if not any(x.dtype == torch.float64 for x in base):
        return None
    if not any(bool((_exact_in(x, torch.float32) == 0).any()) for x in base
               if x.dtype == torch.float64):
        # The user's inputs are float32 values (upcast for the check): a copy or a ReLU of
        # them is float32 too. Nudge them off the float32 grid and look again.
        nudged = [x * (1 + 2.0 ** -40) if x.dtype == torch.float64 else x for x in base]
        try:
            with torch.no_grad():
                outs = subject.select(subject.call(nudged))
        except Exception:  # noqa: BLE001 - user code; the first forward already ran fine
            return None
    values = _informative(outs, base)
    if values is None:
        return None
    for dtype in _CANDIDATES:
        if bool(_exact_in(values, dtype).all()):
            # float32 is left as it was: a float32 kernel's cancellation ((x*x + 1e3) - 1e3)
            # gives grid-like outputs too, and its calibration is fine enough to judge a grid
            half = dtype != torch.float32
            return None if half and _fixed_grid(values, dtype) else dtype
    return None


def finding(dtype: torch.dtype, session: Session) -> Finding:
    """The info finding that says what was detected and how the check adapted."""
    s = session.settings
    name = str(dtype).removeprefix("torch.")
    return Finding(
        "low-precision-numerics", "info",
        f"forward computes in {name} whatever dtype it is handed: handed float64 values "
        f"that are not {name} values, it returns float64 outputs that all are, as fused "
        f"kernels do (they load any dtype and compute in {name}). Finite differences use step "
        f"{s.h:.1g} and tolerances atol={s.atol:.1g}, rtol={s.rtol:.1g}, calibrated to {name}",
        "nothing to fix if the kernels are meant to compute in this precision; pass a "
        "reference= (plain PyTorch of the same inputs) to judge outputs and gradients "
        "against it at the Function's own precision", "setup",
        details={"computes_in": name})


def _exact_in(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    finite = torch.isfinite(x)
    safe = torch.where(finite, x, torch.zeros_like(x))
    with torch.no_grad():
        return (safe.to(dtype).to(x.dtype) == safe) | ~finite


def _fixed_grid(values: torch.Tensor, dtype: torch.dtype) -> bool:
    """Whether one fixed dyadic grid explains ``values`` (float64, all exact in ``dtype``) in
    fewer bits than ``dtype``'s rounding does: multiples of 2^-n cost n + exponent bits a value,
    the dtype its mantissa's bits whatever the value's size. A quantizer's or a bisection's
    outputs spread over several binary orders of magnitude are cheaper as a grid; a kernel's
    rounded outputs are cheaper as the dtype, since its small values carry finer last bits."""
    values = values[values != 0]
    if values.numel() < 4:
        return False
    mantissa, exponent = torch.frexp(values.abs())
    digits = (mantissa * 2.0**53).to(torch.int64)  # exact: 53-bit integers
    lowest = torch.bitwise_and(digits, -digits).double().log2().round().to(torch.int64)
    last = 53 - lowest - exponent  # value = odd * 2**-last
    grid = int((int(last.max()) + exponent).sum())
    bits = round(-math.log2(torch.finfo(dtype).eps)) + 1
    return grid < bits * values.numel()


def _informative(outs: list[torch.Tensor], inputs: list[torch.Tensor] = ()) -> torch.Tensor | None:
    """The output values that say in which precision forward computed: not short dyadic ones,
    and not input values passed through unchanged (a rotary kernel computing in float32 copies
    the heads past rotary_dim, and v of a packed qkv, as they came: float64 values that said
    "float64" and left a float32 computation judged at a float64 step, corpus 13d's
    DeepLinkExt ApplyRotaryEmbQKV_Torch)."""
    flat = [o.detach().reshape(-1) for o in outs if o.dtype == torch.float64]
    if not flat or len(flat) != len(outs):
        return None
    values = torch.cat(flat)
    scaled = values * _SHORT
    values = values[torch.isfinite(values) & (scaled != scaled.round())]
    given = [x.reshape(-1) for x in inputs if x.dtype == torch.float64]
    if given and values.numel():
        values = values[~torch.isin(values, torch.cat(given))]
    if values.numel() == 0:
        return None
    return values
