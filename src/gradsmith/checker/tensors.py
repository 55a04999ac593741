"""Small tensor helpers shared by the checks (layout changes, tolerant comparison)."""

from __future__ import annotations

import torch


def noncontiguous(t: torch.Tensor) -> torch.Tensor:
    """Same values, non-contiguous storage that ``.view(-1)`` cannot flatten.

    Two or more dims: column-major (a transposed copy); one dim: every other element of a
    larger buffer. A sparse tensor has no strides: it is returned as it is.
    """
    if t.layout != torch.strided:
        return t
    if t.dim() == 0 or t.numel() == 0:
        return t.clone()
    if t.dim() >= 2:
        return t.detach().transpose(-1, -2).contiguous().transpose(-1, -2)
    base = torch.zeros((*t.shape, 2), dtype=t.dtype, device=t.device)
    view = base.select(-1, 0)
    view.copy_(t.detach())
    return view


def close(a: torch.Tensor | None, b: torch.Tensor | None, rtol: float, atol: float) -> bool:
    """Tolerant equality that treats None as zeros and NaN as equal to NaN."""
    if a is None and b is None:
        return True
    if a is None or b is None:
        t = a if b is None else b
        return bool((t == 0).all())
    if a.shape != b.shape:
        return False
    a, b = _wide(a, b), _wide(b, a)
    return bool(torch.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True))


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    d = (_wide(a, b) - _wide(b, a)).abs()
    return float(d.max()) if d.numel() else 0.0


#: Run-to-run differences up to this many units of the precision computed in, relative to the
#: gradient's largest entry, are rounding order (a GPU's atomic adds, a parallel reduction), not
#: a different gradient: a float32 sum of n terms reordered moves by about sqrt(n) units.
ROUNDING_UNITS = 1e3


def rounding_only(a: torch.Tensor | None, b: torch.Tensor | None, eps: float) -> bool:
    """Whether ``a`` and ``b`` differ only by summation order at precision ``eps``: at most
    :data:`ROUNDING_UNITS` units of ``eps`` relative to their largest entry (normwise, so a
    sum cancelling to near zero is judged by the size of what it summed)."""
    if a is None or b is None:
        return a is None and b is None
    if a.shape != b.shape:
        return False
    wa, wb = _wide(a, b), _wide(b, a)
    if not (torch.isfinite(wa).all() and torch.isfinite(wb).all()):
        return False
    scale = max(float(wa.abs().max()) if wa.numel() else 0.0,
                float(wb.abs().max()) if wb.numel() else 0.0)
    return max_diff(a, b) <= ROUNDING_UNITS * eps * scale


def _wide(t: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
    """float64, or complex128 when either is complex (never dropping an imaginary part)."""
    return t.to(torch.complex128 if t.is_complex() or other.is_complex() else torch.float64)


def address(t: torch.Tensor) -> int:
    """Where a tensor's values live (``data_ptr``), to tell views of one buffer apart from
    other tensors; a sparse tensor has no single buffer and is known by its identity."""
    return t.data_ptr() if t.layout == torch.strided else id(t)


def same_values(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit-equal values (NaN equal to NaN), sparse tensors compared as dense ones."""
    if a.layout != torch.strided or b.layout != torch.strided:
        if a.layout != b.layout or a.shape != b.shape:
            return False
        a, b = a.to_dense(), b.to_dense()
    return a.shape == b.shape and bool(torch.equal(a, b) or (
        a.is_floating_point() and torch.allclose(a, b, rtol=0, atol=0, equal_nan=True)))
