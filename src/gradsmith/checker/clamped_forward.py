"""Surrogate terms for a straight-through clamp in front of a smooth forward.

A "safe" function clamps its input into the domain and then computes, ``atanh(t.clamp(-lim,
lim))`` or ``log(x.clamp(min=eps))``, while backward passes the derivative at the clamped
value through the clamp (``g / (1 - t.clamp(-lim, lim) ** 2)``): forward is flat outside
``[lo, hi]``, backward is not (corpus 5 held-out: torchrl's safe atanh pair). Its surrogate is
forward itself with the clamp made straight-through, ``Fn.forward(x.clamp(lo, hi).detach()
+ (x - x.detach()), ...)``: autograd's gradient of it is forward's derivative at the clamped
value, times 1. The bounds are read from forward (the ends of its flat tails, by bisection down to
adjacent floats) and printed exactly (as a forward number's ``1 - eps`` form when that is the
same float, else the shortest decimal that is). The caller verifies the term against backward
and on inputs spread over a grid, like every other term.
"""

from __future__ import annotations

import math

import torch

from gradsmith.checker.inputs import overrides
from gradsmith.checker.session import Session

FAR = 1e3  # where a clamped tail is surely flat


def terms(session: Session, names: list[str], top: int, t: int,
          numbers: list[tuple[str, float]]) -> list[str]:
    """``Fn.forward(...)`` with input ``t`` (forward argument ``top``) clamped
    straight-through at forward's own flat tails; [] when forward has none, is not
    element-wise, or cannot be called without a ctx (old style)."""
    cls = session.function_cls
    problem = session.problem
    if (cls is None or cls.__qualname__ != cls.__name__ or not overrides(cls, "setup_context")
            or len(problem.out_shapes) != 1
            or problem.out_shapes[0].numel() != problem.xs[t].numel()):
        return []
    value = _Forward(session, t)
    try:
        lo, hi = value.tail(-FAR), value.tail(FAR)
    except Exception:  # noqa: BLE001 - user code on other values: no term then
        return []
    if lo is None and hi is None:
        return []
    bounds = (f"min={_source(lo, numbers)}" if hi is None else
              f"max={_source(hi, numbers)}" if lo is None else
              f"{_source(lo, numbers)}, {_source(hi, numbers)}")
    x = names[top]
    # clamped value plus an exact 0 with gradient 1: `x + (c - x).detach()` rounds far from
    # the bound (-1 + (1e-6 + 1) is below 1e-6, where forward's own clamp is flat again)
    moved = f"({x}.clamp({bounds}).detach() + ({x} - {x}.detach()))"
    args = ", ".join(moved if i == top else n for i, n in enumerate(names))
    return [f"{cls.__name__}.forward({args})"]


class _Forward:
    """Forward's first output element with every element of input ``t`` set to one value
    (the other arguments as checked): an element-wise forward's value there."""

    def __init__(self, session: Session, t: int):
        self.subject, self.t = session.subject, t
        self.base = self.subject.base()

    def __call__(self, z: float) -> float:
        xs = [b.clone() for b in self.base]
        xs[self.t] = torch.full_like(xs[self.t], z)
        with torch.no_grad():
            out = self.subject.select(self.subject.call(xs))[0]
        return float(out.reshape(-1)[0])

    def tail(self, far: float) -> float | None:
        """The bound of forward's flat tail towards ``far`` (None: no flat tail there)."""
        flat = self(far)
        if self(far - far / abs(far)) != flat:
            return None
        # a value where forward is not flat: 0 unless the tail reaches it (log(x.clamp(min=
        # eps))), then the input's own values and a few more
        base = self.base[self.t].detach().reshape(-1).to(torch.float64).tolist()
        for inside in (0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, *base):
            if abs(inside) < abs(far) and self(inside) != flat:
                return self.edge(far, inside)
        return None

    def edge(self, outside: float, inside: float) -> float:
        """The last value from ``outside`` where forward still equals its value there (the
        clamp's bound), by bisection down to adjacent floats."""
        flat = self(outside)
        a, b = outside, inside
        for _ in range(80):  # from 1e3 down to a float's spacing at 1e-6
            mid = (a + b) / 2
            if mid in (a, b):
                break
            if self(mid) == flat:
                a = mid
            else:
                b = mid
        return a


def _source(value: float, numbers: list[tuple[str, float]]) -> str:
    """``value`` as source within a few floats of it (a smooth op can round the first values
    inside the bound to the bound's own result): ``eps``, ``-eps``, ``1 - eps`` or ``-(1 -
    eps)`` for a forward number, else the shortest such decimal."""
    close = 8 * math.ulp(value)
    for name, arg in numbers:
        for text, got in ((name, arg), (f"-{name}", -arg), (f"1 - {name}", 1 - arg),
                          (f"-(1 - {name})", -(1 - arg))):
            if abs(got - value) <= close:
                return text
    for digits in range(1, 18):
        text = f"{value:.{digits}g}"
        if abs(float(text) - value) <= close:
            return text
    return repr(float(value))
