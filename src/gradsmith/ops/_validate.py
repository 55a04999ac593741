"""Argument validation shared by the catalog ops.

Every helper takes the public function's name (``fn``) and the argument's name (``name``) first,
so each message reads ``<fn>: <name> must be ..., got <value>; <fix>`` and the user can find the
offending argument without reading a traceback. Helpers return the (normalised) value so a call
site can validate and convert in one line.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from typing import Any

import torch

from gradsmith._errors import GradsmithError

__all__ = [
    "check_tensor",
    "check_devices",
    "check_fits",
    "check_floating",
    "check_same_shape",
    "check_broadcastable",
    "check_dim",
    "check_number",
    "check_positive",
    "check_nonnegative",
    "check_int",
    "check_bool",
    "check_choice",
    "check_generator",
]


def check_tensor(fn: str, name: str, value: Any) -> torch.Tensor:
    """Require a ``torch.Tensor``.

    Example:
        >>> check_tensor("gelu", "x", [1.0])
        Traceback (most recent call last):
        ...
        gradsmith._errors.GradsmithError: gelu: x must be a torch.Tensor, got list; wrap it with torch.as_tensor(...)
    """
    if not isinstance(value, torch.Tensor):
        raise GradsmithError(
            f"{fn}: {name} must be a torch.Tensor, got {type(value).__name__}; "
            f"wrap it with torch.as_tensor(...)"
        )
    return value


def check_floating(fn: str, name: str, value: Any) -> torch.Tensor:
    """Require a floating-point tensor (gradients are undefined for integer and bool tensors).

    Example:
        >>> check_floating("gelu", "x", torch.arange(3))
        Traceback (most recent call last):
        ...
        gradsmith._errors.GradsmithError: gelu: x must be a floating-point tensor, got dtype torch.int64; convert it with x.float() (or .double())
    """
    check_tensor(fn, name, value)
    if value.is_complex():
        raise GradsmithError(
            f"{fn}: {name} must be a real floating-point tensor, got dtype {value.dtype}; "
            f"complex inputs are not supported: pass {name}.real and {name}.imag separately "
            f"(or {name}.abs())"
        )
    if not value.is_floating_point():
        raise GradsmithError(
            f"{fn}: {name} must be a floating-point tensor, got dtype {value.dtype}; "
            f"convert it with {name}.float() (or .double())"
        )
    return value


def check_devices(fn: str, *named: tuple[str, Any]) -> torch.device | None:
    """Require real data on one device: no ``meta`` tensor, and every tensor on the same device.

    Args:
        fn: the public function's name.
        *named: ``(name, value)`` pairs; values that are not tensors (``None``, numbers) are
            skipped.

    Returns:
        The common device (``None`` when no tensor was given).

    Example:
        >>> check_devices("fused_add_relu", ("x", torch.ones(2)), ("y", torch.ones(2, device="meta")))
        Traceback (most recent call last):
        ...
        gradsmith._errors.GradsmithError: fused_add_relu: y is on the meta device (a shape without data), got shape (2,); the op computes values, so give it real data on cpu or cuda (a meta-initialised model: module.to_empty(device='cpu'), then initialise its weights)
    """
    device, first = None, None
    for name, value in named:
        if not isinstance(value, torch.Tensor):
            continue
        if value.device.type == "meta":
            raise GradsmithError(
                f"{fn}: {name} is on the meta device (a shape without data), got shape "
                f"{tuple(value.shape)}; the op computes values, so give it real data on cpu or "
                f"cuda (a meta-initialised model: module.to_empty(device='cpu'), then "
                f"initialise its weights)"
            )
        if device is None:
            device, first = value.device, name
        elif value.device != device:
            raise GradsmithError(
                f"{fn}: {first} is on {device} but {name} is on {value.device}; every tensor "
                f"must be on one device: move it with {name}.to({first}.device)"
            )
    return device


def check_fits(fn: str, name: str, value: float, dtype: torch.dtype) -> float:
    """Require a number whose magnitude ``dtype`` holds as a normal value (or exactly 0).

    A hyperparameter beyond the dtype's largest finite value becomes ``inf`` inside the op, and
    one below its smallest normal value underflows to 0 (often a division by zero): both turn
    the output into ``inf``/``nan``.

    Example:
        >>> check_fits("clipped_relu", "clip_val", 1e308, torch.float32)
        Traceback (most recent call last):
        ...
        gradsmith._errors.GradsmithError: clipped_relu: clip_val = 1e+308 does not fit the input's dtype torch.float32 (normal magnitudes 1.18e-38 to 3.4e+38); choose a value in that range, or compute in float64
    """
    if not dtype.is_floating_point:
        return value
    info = torch.finfo(dtype)
    if value != 0 and not info.tiny <= abs(value) <= info.max:
        raise GradsmithError(
            f"{fn}: {name} = {value:g} does not fit the input's dtype {dtype} (normal "
            f"magnitudes {info.tiny:.3g} to {info.max:.3g}); choose a value in that range, or "
            f"compute in float64"
        )
    return value


def check_same_shape(fn: str, name_a: str, a: torch.Tensor, name_b: str,
                     b: torch.Tensor) -> None:
    """Require two tensors of exactly the same shape (no broadcasting)."""
    if a.shape != b.shape:
        raise GradsmithError(
            f"{fn}: {name_a} and {name_b} must have the same shape, got "
            f"{tuple(a.shape)} and {tuple(b.shape)}; reshape or expand them explicitly"
        )


def check_broadcastable(fn: str, name_a: str, a: torch.Tensor, name_b: str,
                        b: torch.Tensor) -> torch.Size:
    """Require two tensors whose shapes broadcast; return the broadcast shape."""
    if a.shape == b.shape:  # the common case, without torch.broadcast_shapes' Python
        return a.shape
    try:
        return torch.broadcast_shapes(a.shape, b.shape)
    except RuntimeError:
        raise GradsmithError(
            f"{fn}: {name_a} and {name_b} must have broadcastable shapes, got "
            f"{tuple(a.shape)} and {tuple(b.shape)}; see torch broadcasting semantics"
        ) from None


def check_dim(fn: str, name: str, dim: Any, ndim: int) -> int:
    """Require an int dimension valid for a tensor of ``ndim`` dims; return it non-negative.

    Example:
        >>> check_dim("logsumexp", "dim", -1, 3)
        2
        >>> check_dim("logsumexp", "dim", 3, 3)
        Traceback (most recent call last):
        ...
        gradsmith._errors.GradsmithError: logsumexp: dim must be in [-3, 2] for a 3-d tensor, got 3
    """
    if isinstance(dim, bool) or not isinstance(dim, numbers.Integral):
        raise GradsmithError(f"{fn}: {name} must be an int, got {type(dim).__name__} {dim!r}")
    lo, hi = -max(ndim, 1), max(ndim, 1) - 1
    if not lo <= dim <= hi:
        raise GradsmithError(
            f"{fn}: {name} must be in [{lo}, {hi}] for a {ndim}-d tensor, got {dim}"
        )
    return int(dim) % max(ndim, 1)


def check_number(fn: str, name: str, value: Any) -> float:
    """Require a finite real Python number (or 0-d tensor without grad); return it as float."""
    if isinstance(value, torch.Tensor) and value.dim() == 0 and not value.requires_grad:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise GradsmithError(
            f"{fn}: {name} must be a real number, got {type(value).__name__} {value!r}"
        )
    value = float(value)
    if not math.isfinite(value):
        raise GradsmithError(f"{fn}: {name} must be finite, got {value}")
    return value


def check_positive(fn: str, name: str, value: Any) -> float:
    """Require a finite number > 0; return it as float.

    Example:
        >>> check_positive("clipped_relu", "clip_val", -1.0)
        Traceback (most recent call last):
        ...
        gradsmith._errors.GradsmithError: clipped_relu: clip_val must be > 0, got -1.0
    """
    value = check_number(fn, name, value)
    if value <= 0:
        raise GradsmithError(f"{fn}: {name} must be > 0, got {value}")
    return value


def check_nonnegative(fn: str, name: str, value: Any) -> float:
    """Require a finite number >= 0; return it as float."""
    value = check_number(fn, name, value)
    if value < 0:
        raise GradsmithError(f"{fn}: {name} must be >= 0, got {value}")
    return value


def check_int(fn: str, name: str, value: Any, *, min_value: int | None = None,
              max_value: int | None = None, hint: str = "") -> int:
    """Require a Python int (not bool), optionally within ``[min_value, max_value]``.

    ``hint`` (the fix, for example why the bound is what it is) ends the message.

    Example:
        >>> check_int("quantize", "bits", 1, min_value=2, max_value=16, hint="8 is typical")
        Traceback (most recent call last):
        ...
        gradsmith._errors.GradsmithError: quantize: bits must be an int in [2, 16], got 1; 8 is typical
    """
    suffix = f"; {hint}" if hint else ""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise GradsmithError(
            f"{fn}: {name} must be an int, got {type(value).__name__} {value!r}{suffix}"
        )
    value = int(value)
    if (min_value is not None and value < min_value) or (
            max_value is not None and value > max_value):
        lo = "-inf" if min_value is None else str(min_value)
        hi = "inf" if max_value is None else str(max_value)
        raise GradsmithError(f"{fn}: {name} must be an int in [{lo}, {hi}], got {value}{suffix}")
    return value


def check_bool(fn: str, name: str, value: Any) -> bool:
    """Require a real ``bool`` (catches ``hard="yes"`` or a tensor passed by mistake)."""
    if not isinstance(value, bool):
        raise GradsmithError(
            f"{fn}: {name} must be True or False, got {type(value).__name__} {value!r}"
        )
    return value


def check_choice(fn: str, name: str, value: Any, choices: Iterable[Any]) -> Any:
    """Require ``value`` to be one of ``choices``.

    Example:
        >>> check_choice("soft_rank", "regularization", "l1", ("l2", "kl"))
        Traceback (most recent call last):
        ...
        gradsmith._errors.GradsmithError: soft_rank: regularization must be one of 'l2', 'kl', got 'l1'
    """
    choices = tuple(choices)
    if value not in choices:
        options = ", ".join(repr(c) for c in choices)
        raise GradsmithError(f"{fn}: {name} must be one of {options}, got {value!r}")
    return value


def check_generator(fn: str, name: str, value: Any) -> torch.Generator | None:
    """Require ``None`` or a ``torch.Generator``."""
    if value is not None and not isinstance(value, torch.Generator):
        raise GradsmithError(
            f"{fn}: {name} must be a torch.Generator or None, got {type(value).__name__}; "
            f"create one with torch.Generator().manual_seed(0)"
        )
    return value
