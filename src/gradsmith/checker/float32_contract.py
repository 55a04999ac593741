"""A Function whose float64 run is broken while float32 is what it computes in: checked in
float32 (private).

Checks run in float64, for precise finite differences. Some Functions hand their tensors' raw
memory to a library that reads it as float32 (gtn's ``set_weights(t.data_ptr())`` in
gtn_applications' CTC, ASG and STC losses): float64 inputs then give a loss computed from
reinterpreted bytes, piecewise constant or infinite, with float32 outputs. The rows were FAIL
(undeclared-estimator, precision-loss) or INCOMPLETE (nan-output) on correct Functions whose
contract is float32.

:func:`broken` is consulted once the float64 forward ran, and only when its outputs are
float32 (the Function computes in float32 whatever it is given): one more forward with the
same values in float32 decides (a forward that draws random numbers is left alone: the two
dtypes draw different numbers). When the float64 outputs are non-finite where the float32 ones
are finite, or differ from them by far more than float32 rounding of the same computation
(:data:`BROKEN`, relative), float64 is outside the Function's contract: every check then runs
in float32 (the calibrated float32 tolerances; the float32 precision check skips, its float64
reference being the broken run) and :func:`finding` says why. Where the outputs agree, the
gradients of one backward in each dtype (same values, same random grad_output) are compared
the same way: a fused router's backward handed a float64 tensor to a kernel written for float32
tiles returned a wrong input gradient for float64 only, while its float32 gradient is right. A wrong backward fails in
float32 as it does in float64; a Function whose float32 run is broken too stays in float64.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from gradsmith.checker.inputs import flatten_outputs
from gradsmith.checker.report import Finding

#: Relative difference between the float64 and the float32 outputs above which the float64
#: run is not float32 rounding of the same computation (that is ~1e-7 relative).
BROKEN = 1e-3


def broken(subject: Any, out: Any) -> str | None:
    """Why ``subject``'s float64 forward (which returned ``out``) is broken where float32 is
    not, else None (see the module)."""
    double = _floats(out)
    if subject.dtype != torch.float64 or not double or any(
            o.dtype != torch.float32 for o in double):
        return None
    subject.dtype = torch.float32
    try:
        single = _floats(subject.call([x.detach().clone() for x in subject.base()]))
    except Exception:  # noqa: BLE001 - a float32 forward that raises shows no contract
        return None
    finally:
        subject.dtype = torch.float64
    if len(single) != len(double):
        return None
    worst = 0.0
    for a, b in zip(double, single):
        if a.shape != b.shape or not torch.isfinite(b).all():
            return None  # float32 broken too: nothing to prefer
        if not torch.isfinite(a).all():
            return ("float64 inputs give non-finite outputs where the same values in float32 "
                    "give finite ones")
        scale = float(b.abs().max()) + 1e-6
        worst = max(worst, float((a.double() - b.double()).abs().max()) / scale)
    what = "outputs"
    if worst <= BROKEN:
        # forward agrees: its backward may still not (a float64 gradient into a float32 tile)
        what, worst = "gradients", _backward_gap(subject)
    if worst <= BROKEN or not _deterministic(subject, double):
        return None  # float32 rounding; or random draws, which differ between the dtypes
    if worst == math.inf:
        return (f"float64 inputs give non-finite {what} where the same values in float32 "
                "give finite ones")
    return (f"float64 inputs give {what} {worst:.2g} (relative) away from those of the same "
            f"values in float32, far beyond float32 rounding (below {BROKEN:g}), while the "
            "outputs are float32 either way")


def _backward_gap(subject: Any) -> float:
    """How far (relative) the float64 gradients are from the float32 ones at the same values
    and the same grad_output (a fixed random one: ones would vanish through a normalisation);
    0.0 when it cannot tell (a backward raising, float32 non-finite: nothing to prefer)."""
    runs = [_gradients(subject, dtype) for dtype in (torch.float64, torch.float32)]
    if runs[0] is None or runs[1] is None or len(runs[0]) != len(runs[1]):
        return 0.0
    worst = 0.0
    for a, b in zip(*runs):
        if a is None and b is None:
            continue  # an input neither run differentiates
        if a is None or b is None or a.shape != b.shape or not torch.isfinite(b).all():
            return 0.0
        if not torch.isfinite(a).all():
            return math.inf
        scale = float(b.abs().max()) + 1e-6
        worst = max(worst, float((a.double() - b.double()).abs().max()) / scale)
    return worst


def _gradients(subject: Any, dtype: torch.dtype) -> list[torch.Tensor | None] | None:
    """One forward and backward in ``dtype``, grad_output drawn in float32 (the same values
    in both dtypes); None when either raises or nothing is differentiable."""
    subject.dtype = dtype
    try:
        leaves = subject.fresh_leaves()
        outs = [o for o in flatten_outputs(subject.call([x.clone() for x in leaves]))
                if isinstance(o, torch.Tensor) and o.is_floating_point() and o.requires_grad]
        if not outs:
            return None
        gen = torch.Generator().manual_seed(7)
        cots = [torch.randn(o.shape, generator=gen).to(o.device, o.dtype) for o in outs]
        return list(torch.autograd.grad(outs, leaves, cots, allow_unused=True))
    except Exception:  # noqa: BLE001 - user code; the float64 backward already ran once
        return None
    finally:
        subject.dtype = torch.float64


def finding(why: str) -> Finding:
    """The warning a float32 check carries."""
    return Finding(
        "float32-contract", "warning",
        f"checked in float32: {why}. The Function reads its tensors as float32 (a library "
        "handed the tensor's memory, or code written for float32 only), so float64 inputs "
        "are outside its contract: they silently give other values",
        "nothing to fix if float32 is the contract; to accept float64 inputs, convert them "
        "(`x.float()`) before handing their memory on, or reject them in forward",
        "setup", None, {"checked_in": "float32"})


def _deterministic(subject: Any, double: list[torch.Tensor]) -> bool:
    """Whether the float64 forward gives the same outputs from another random state."""
    try:
        again = _floats(subject.call([x.detach().clone() for x in subject.base()],
                                     seed=subject.seed + 1))
    except Exception:  # noqa: BLE001
        return False
    return len(again) == len(double) and all(
        a.shape == b.shape and torch.equal(a, b) for a, b in zip(again, double))


def _floats(out: Any) -> list[torch.Tensor]:
    return [o.detach() for o in flatten_outputs(out)
            if isinstance(o, torch.Tensor) and o.is_floating_point()]
