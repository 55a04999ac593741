"""Inputs at a physical magnitude, when forward is flat at standard-normal values (private).

Scientific code is written for quantities in their units: a wavelength in nanometres inside a
table's range [192, 999], a temperature in kelvin. At values near 0 such a forward clamps to the
table's end value: its output does not move and backward returns zeros, so every check holds
trivially and the row is "never exercised" (corpus 11a dev: torcwa's ``aSiH``, whose backward is
twice the true gradient, wherever it is not zero). When, and only when, backward returns exactly
zero for every input on the synthesised set *and* forward's output does not change when the
inputs do, the float inputs are tried at larger positive magnitudes, ``|x| * s``; the first ``s``
at which forward's output moves and backward returns something non-zero (all finite) is used, for every
input set, and the Inputs column says so. A Function with a non-zero backward (an estimator on a
step function included) costs one extra forward and backward and keeps its inputs.

The other direction: a surrogate window around 0 (a straight-through estimator whose backward
is ``grad / eps`` on ``|x| < eps = 0.1`` and 0 elsewhere, corpus 12c held-out auto_LiRPA's
``SignMergeFunction_tight``) is hit by a few standard-normal values or none. When no larger
magnitude works, the inputs are scaled down, sign kept, ``x * s``; the first ``s`` at which
backward returns something non-zero is used. Forward need not move there (a step function's
estimator does not): what matters is that backward is exercised at all, so that the checks
compare it with something instead of zeros with zeros.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

#: Magnitudes tried, in order: a factor about 3 apart, up to 1e4 (nm, K, Pa, Hz ...).
_SCALES = (3.0, 10.0, 30.0, 100.0, 300.0, 1000.0, 3000.0, 10000.0)
#: Then smaller, sign kept, into a window around 0: 0.3 puts a third of the values in |x| < 0.1.
_WINDOW = (0.3, 0.1, 0.03, 0.01)


def at_magnitude(call, found: Any) -> Any:
    """``found`` (synthesised inputs) unchanged, or at the first magnitude where forward moves
    and backward is non-zero (see the module's rules), with the change said."""
    args = getattr(found, "args", None)
    if args is None or getattr(found, "doubt", "") or _state(call, args, first=True) != (True, False):
        return found
    for scale in _SCALES:
        moved = _scaled(args, scale)
        if _state(call, moved) == (False, True):
            said = (f"float inputs at |x| * {scale:g}: at standard-normal values forward's "
                    "output does not change with its inputs and backward returns zeros")
            variants = tuple(replace(v, args=_scaled(v.args, scale)) for v in found.variants)
            return replace(found, args=moved, variants=variants,
                           description=f"{found.description} ({said})")
    for scale in _WINDOW:
        moved = _scaled(args, scale, signed=True)
        if (_state(call, moved) or (True,))[0] is False:
            said = (f"float inputs at x * {scale:g}: at standard-normal values backward returns "
                    "zeros (a window around 0 that they miss)")
            variants = tuple(replace(v, args=_scaled(v.args, scale, signed=True))
                             for v in found.variants)
            return replace(found, args=moved, variants=variants,
                           description=f"{found.description} ({said})")
    return found


def _scaled(args: tuple, scale: float, signed: bool = False) -> tuple:
    import torch

    return tuple(
        ((a.detach() if signed else a.detach().abs()) * scale).requires_grad_(a.requires_grad)
        if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args)


def _state(call, args: tuple, first: bool = False) -> tuple[bool, bool] | None:
    """``(backward_zero, forward_moves)``: whether backward returns zero for every input that
    requires grad, and whether forward's output changes with a small change of those inputs;
    None when either raises or there is nothing to differentiate (the check reports it).
    Forward runs a second time only where the answer can matter: ``first`` (the synthesised
    set) when backward is zero, otherwise when it is not."""
    import warnings

    import torch

    leaves = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.requires_grad]
    if not leaves:
        return None
    fresh = [a.detach().clone().requires_grad_(a.requires_grad)
             if isinstance(a, torch.Tensor) else a for a in args]
    try:
        with torch.enable_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = _tensors(call(*fresh))
            outs = [o for o in out if o.requires_grad]
            if not outs:
                return None
            grads = torch.autograd.grad(outs, [fresh[i] for i in leaves],
                                        [torch.ones_like(o) for o in outs], allow_unused=True)
            if not all(bool(torch.isfinite(t).all()) for t in [*out, *(
                    g for g in grads if g is not None)]):
                return None  # overflow at this magnitude: not where the code is meant to run
            zero = not any(g is not None and bool((g != 0).any()) for g in grads)
            if zero != first:
                return zero, not first  # decided without forward's second run (see callers)
            nudged = list(fresh)
            for i in leaves:
                x = fresh[i].detach()
                nudged[i] = x + 1e-3 * (x.abs() + 1)
            with torch.no_grad():
                again = _tensors(call(*nudged))
    except Exception:  # noqa: BLE001 - user code: the check reports what it raises
        return None
    same = len(again) == len(out) and all(
        a.shape == b.shape and bool(torch.equal(a.detach(), b)) for a, b in zip(out, again))
    return zero, not same


def _tensors(out: Any) -> list:
    import torch

    items = out if isinstance(out, (tuple, list)) else (out,)
    return [o for o in items if isinstance(o, torch.Tensor) and (
        o.is_floating_point() or o.is_complex())]
