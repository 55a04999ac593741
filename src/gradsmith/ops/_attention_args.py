"""Argument validation for :func:`gradsmith.functional.attention`.

Every failure is a :class:`~gradsmith.GradsmithError` naming the argument, what was expected,
what was received and the fix. Shape checks use static shapes only, so they cost nothing under
``torch.compile``.
"""

from __future__ import annotations

import torch

from gradsmith._errors import GradsmithError
from gradsmith.ops._validate import (
    check_bool,
    check_devices,
    check_fits,
    check_floating,
    check_generator,
    check_int,
    check_number,
    check_positive,
    check_tensor,
)

_FN = "attention"


def check_qkv(q, k, v) -> None:
    """q (..., L, d), k (..., S, d), v (..., S, dv): same batch dims, dtype and device."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_floating(_FN, name, t)
        if t.dim() < 2:
            raise GradsmithError(
                f"{_FN}: {name} must have at least 2 dims (..., length, features), got shape "
                f"{tuple(t.shape)}; add a batch or length dim with {name}.unsqueeze(0)")
        if t.shape[-2] == 0:
            raise GradsmithError(f"{_FN}: {name} must have a non-empty length dim, got shape "
                                 f"{tuple(t.shape)}; skip the call for an empty sequence")
    check_devices(_FN, ("q", q), ("k", k), ("v", v))
    if q.shape[-1] == 0:
        raise GradsmithError(f"{_FN}: q and k must have a non-empty feature dim (the default "
                             f"scale is 1/sqrt(d)), got q {tuple(q.shape)}; give each head at "
                             f"least one feature")
    if not q.dtype == k.dtype == v.dtype:
        raise GradsmithError(f"{_FN}: q, k and v must share a dtype, got {q.dtype}, {k.dtype} and "
                             f"{v.dtype}; convert them with .to(q.dtype)")
    if not q.device == k.device == v.device:
        raise GradsmithError(f"{_FN}: q, k and v must be on one device, got {q.device}, "
                             f"{k.device} and {v.device}; move them with .to(q.device)")
    if not q.shape[:-2] == k.shape[:-2] == v.shape[:-2]:
        raise GradsmithError(
            f"{_FN}: q, k and v must have the same batch dims, got shapes {tuple(q.shape)}, "
            f"{tuple(k.shape)} and {tuple(v.shape)}; expand them to a common batch shape "
            f"(for grouped keys use k.expand(...))")
    if q.shape[-1] != k.shape[-1]:
        raise GradsmithError(
            f"{_FN}: q and k must have the same feature size (last dim), got q {tuple(q.shape)} "
            f"and k {tuple(k.shape)}; project them to a common head dim")
    if k.shape[-2] != v.shape[-2]:
        raise GradsmithError(
            f"{_FN}: k and v must have the same length (dim -2), got k {tuple(k.shape)} and v "
            f"{tuple(v.shape)}; every key needs exactly one value")


def _check_broadcast_to(name: str, t: torch.Tensor, full: tuple[int, ...]) -> None:
    try:
        ok = torch.broadcast_shapes(t.shape, full) == full
    except RuntimeError:
        ok = False
    if not ok:
        raise GradsmithError(
            f"{_FN}: {name} must broadcast to the score shape (..., L, S) = {full}, got shape "
            f"{tuple(t.shape)}; give it shape (L, S), (heads, L, S) or add size-1 dims")


def check_mask(mask, full: tuple[int, ...], q: torch.Tensor):
    """Boolean mask (True = keep), broadcastable to the scores without growing them."""
    if mask is None:
        return None
    check_tensor(_FN, "mask", mask)
    check_devices(_FN, ("q", q), ("mask", mask))
    if mask.dtype != torch.bool:
        raise GradsmithError(
            f"{_FN}: mask must be a bool tensor (True = attend), got dtype {mask.dtype}; for an "
            f"additive float mask pass it as bias=..., or convert with mask.bool()")
    _check_broadcast_to("mask", mask, full)
    return mask


def _check_floating_on(name: str, t, device: torch.device) -> None:
    check_floating(_FN, name, t)
    if t.device.type == "meta" or t.device != device:
        check_devices(_FN, ("q", torch.empty(0, device=device)), (name, t))


def check_bias(bias, full: tuple[int, ...], device: torch.device):
    """Floating additive bias, broadcastable to the scores without growing them."""
    if bias is None:
        return None
    _check_floating_on("bias", bias, device)
    _check_broadcast_to("bias", bias, full)
    return bias


def check_rel_bias(rel, full: tuple[int, ...], device: torch.device):
    """Compact relative bias ``(..., L + S - 1)`` whose leading dims broadcast to the batch dims."""
    if rel is None:
        return None
    _check_floating_on("rel_bias", rel, device)
    *batch, L, S = full
    n = L + S - 1
    if rel.dim() == 0 or rel.shape[-1] != n:
        raise GradsmithError(
            f"{_FN}: rel_bias must have last dim L + S - 1 = {L} + {S} - 1 = {n} (one entry per "
            f"offset j - i from {1 - L} to {S - 1}), got shape {tuple(rel.shape)}; build it over "
            f"torch.arange({n}) - {L - 1}")
    try:
        ok = torch.broadcast_shapes(rel.shape[:-1], tuple(batch)) == tuple(batch)
    except RuntimeError:
        ok = False
    if not ok:
        raise GradsmithError(
            f"{_FN}: rel_bias leading dims must broadcast to the batch dims of q {tuple(batch)}, "
            f"got shape {tuple(rel.shape)}; give it shape ({n},), (heads, {n}) or add size-1 "
            f"dims")
    return rel


def check_options(is_causal, scale, dropout_p, generator, batch_offset, d: int,
                  dtype: torch.dtype = torch.float64):
    """Return ``(is_causal, scale, dropout_p, generator, batch_offset)`` normalised."""
    check_bool(_FN, "is_causal", is_causal)
    scale = d ** -0.5 if scale is None else check_positive(_FN, "scale", scale)
    check_fits(_FN, "scale", scale, dtype)
    dropout_p = check_number(_FN, "dropout_p", dropout_p)
    if not 0.0 <= dropout_p < 1.0:
        raise GradsmithError(
            f"{_FN}: dropout_p must be in [0, 1), got {dropout_p}; use 0.0 to disable dropout "
            f"(p = 1 would drop every weight)")
    check_generator(_FN, "generator", generator)
    batch_offset = check_int(_FN, "dropout_batch_offset", batch_offset, min_value=0)
    return is_causal, scale, dropout_p, generator, batch_offset
