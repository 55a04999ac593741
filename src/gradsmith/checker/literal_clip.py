"""An incoming gradient clipped to literal bounds that backward writes as numbers (or shifted by
a literal constant it adds).

A gradient-clipping Function (identity forward) often clips to constants of its own
(``grad.clamp(-0.5, 0.5)``: LorentzDNN's ``scale_grad``, corpus 11b dev), not to a forward
argument, so the candidates read from forward's numbers found none and the user got a template.
The bounds are read from what backward returned where it differs from the incoming gradient:
one value on each side, printed as the shortest decimal that still equals it. Each string is
only a candidate, run against backward by the caller before it is printed as checked.
"""

from __future__ import annotations


def candidates(grad: str, incoming, returned) -> list[str]:
    """``grad.clamp(lo, hi)`` (``clamp(-c, c)`` when symmetric, one side when only one is
    seen) for backward's ``returned`` gradient against the ``incoming`` one (same shape).

    Example:
        >>> import torch
        >>> g = torch.tensor([-2.0, -0.1, 0.3, 1.7])
        >>> candidates("grad", g, g.clamp(-0.5, 0.5))
        ['grad.clamp(-0.5, 0.5)']
    """
    if incoming.shape != returned.shape or incoming.numel() == 0:
        return []
    offset = _offset(grad, incoming, returned)
    if offset is not None:
        return [offset]
    scale = float(incoming.abs().max())
    changed = (returned - incoming).abs() > 1e-12 * max(scale, 1e-300)
    above, below = returned[changed & (incoming > 0)], returned[changed & (incoming < 0)]
    hi, lo = _constant(above), _constant(below)
    if hi is None and lo is None:
        return []
    if hi is not None and lo is not None:
        if hi > 0 and _close(lo, -hi):
            return [f"{grad}.clamp(-{_short(hi)}, {_short(hi)})"]
        return [f"{grad}.clamp({_short(lo)}, {_short(hi)})"] if lo < hi else []
    if hi is not None:
        return ([f"{grad}.clamp(-{_short(hi)}, {_short(hi)})"] if hi > 0 else []) + [
            f"{grad}.clamp(max={_short(hi)})"]
    return ([f"{grad}.clamp({_short(lo)}, {_short(-lo)})"] if lo < 0 else []) + [
        f"{grad}.clamp(min={_short(lo)})"]


def _offset(grad: str, incoming, returned) -> str | None:
    """``grad + c`` where backward added one constant to every element (a demonstration of
    manipulating gradients, a bias added to push parameters one way: bandlimited-cnns'
    ``ManipulateGradientStatic``, corpus 13c held-out), else None.

    Example:
        >>> import torch
        >>> g = torch.tensor([-2.0, -0.1, 0.3, 1.7], dtype=torch.float64)
        >>> _offset("grad", g, g + 0.42)
        'grad + 0.42'
    """
    c = _constant(returned.to(incoming.dtype) - incoming)
    if c is None or c == 0 or incoming.numel() < 2:
        return None
    return f"{grad} + {_short(c)}" if c > 0 else f"{grad} - {_short(-c)}"


def _constant(values) -> float | None:
    """The one value ``values`` all take (None when empty or not one value)."""
    if values.numel() == 0:
        return None
    first = float(values.reshape(-1)[0])
    return first if all(_close(float(v), first) for v in values.reshape(-1)) else None


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-12 * max(abs(a), abs(b), 1e-300)


def _short(c: float) -> str:
    """The shortest decimal that still equals ``c`` (``0.5``, not ``0.49999999999999994``)."""
    for digits in range(1, 18):
        text = f"{c:.{digits}g}"
        if _close(float(text), c):
            return text
    return repr(c)
