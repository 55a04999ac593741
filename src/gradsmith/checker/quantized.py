"""A backward that returns forward's derivative at low precision: rounded to a grid.

icefall's DoubleSwish, SwooshL and SwooshR store their derivative in 8 bits (256 levels over
its range, with a random dither that makes the rounding unbiased) and backward returns that
stored value: within one grid step of the derivative everywhere, never equal to it. That is
neither a wrong formula nor an estimator of some other function's gradient: it is an
approximate gradient by design, and gradsmith judges it as one (``approximate=True``: the
relative error and cosine of ``J^T v`` against finite differences, thresholds
``max_relative_error`` and ``min_cosine``).

The signature, read from backward's derivative ``d`` and forward's finite-difference derivative
``f`` of an element-wise forward at a grid of values (the estimator oracle of
:mod:`gradsmith.checker.surrogate_fit`): the distinct values of ``d`` are whole multiples of one
step ``s`` apart, at least :data:`MIN_LEVELS` steps span the derivative's range, and ``|d - f|
<= s`` everywhere (one step of rounding, a bias of a small fraction of a step allowed). A wrong
formula does not stay within one grid step of the derivative; a piecewise-constant surrogate
(a window: two levels) has too few levels.
"""

from __future__ import annotations

import math

import torch

from gradsmith.checker.session import Session
from gradsmith.checker.surrogate_fit import _Oracle

MIN_LEVELS = 16  # fewer steps across the derivative's range is a window, not a precision
MAX_BITS = 16  # a finer grid is float rounding, which the gradients check's tolerance absorbs
# The trend of backward's rounding error across the derivative's range, in steps, at most,
# where the error spreads over more than one step (a dither): a dither's is 0 up to sampling
# noise (at most 0.15 step over the ~170 values examined, 4-8 bits), a factor off by r shows
# r * span (a 4-bit grid's 1.04 factor: 0.5 step)
MAX_TREND = 0.35


def signature(session: Session, t: int) -> tuple[float, int] | None:
    """``(step, levels)`` when backward's derivative of input ``t`` is forward's rounded to a
    grid of that step, or None."""
    problem = session.problem
    pieces = problem.split(torch.zeros(problem.m, dtype=torch.float64))
    x = problem.xs[t]
    if len(pieces) != 1 or pieces[0].numel() != x.numel() or x.is_complex():
        return None
    oracle = _Oracle(session, t)
    try:
        values = torch.cat([x.detach().reshape(-1).to(torch.float64), oracle.GRID[:161]])
        d, _ = oracle(values)
        f = _forward_derivative(session, t, values)
    except Exception:  # noqa: BLE001 - user code on other values: no signature then
        return None
    keep = torch.isfinite(d) & torch.isfinite(f)
    d, f = d[keep], f[keep]
    if d.numel() < MIN_LEVELS:
        return None
    levels = torch.unique(d)
    span = float(levels[-1] - levels[0])
    if levels.numel() < 3 or span == 0:
        return None
    count = round(span / float((levels[1:] - levels[:-1]).min())) + 1
    if not MIN_LEVELS <= count <= 2 ** MAX_BITS:
        return None
    step = span / (count - 1)  # from the ends: the levels may be rounded to float32
    k = ((levels - levels[0]) / step).round()
    if float((levels - levels[0] - k * step).abs().max()) > 0.01 * step:
        return None  # not one grid
    err = (d - f).abs()
    if float(err.max()) > 1.05 * step + 1e-9 * float(f.abs().max()):
        return None  # further from the derivative than one step: a wrong formula
    spread = float((d - f).max() - (d - f).min())
    if spread > 1.05 * step and _trend(d, f) > MAX_TREND * step:
        return None  # wider than rounding, and not a dither's: a wrong factor under the grid
    return step, count


def _trend(d: torch.Tensor, f: torch.Tensor) -> float:
    """How much ``d - f`` changes across the derivative's range along a straight line fitted
    to it (least squares on ``f``): about 0 for a dithered rounding (its error does not
    depend on the value rounded); ``r * span`` for a derivative off by a factor ``1 + r`` (or
    a term growing with it) hidden under a coarse grid's step. Asked only where ``d - f``
    spreads over more than one step: a deterministic rounding (nearest, floor) stays within
    one, but its error follows clusters of values and has a trend of its own."""
    centred = f - f.mean()
    spread = float(centred @ centred)
    if spread == 0.0:
        return 0.0
    slope = float(centred @ (d - f)) / spread
    return abs(slope) * float(f.max() - f.min())


def _forward_derivative(session: Session, t: int, values: torch.Tensor) -> torch.Tensor:
    """Central differences of the element-wise forward at ``values`` (every other argument as
    in the check), in chunks the size of input ``t``."""
    subject = session.subject
    base = subject.base()
    x = base[t]
    n = x.numel()
    out = []
    for chunk in values.split(n):
        filled = torch.cat([chunk, chunk[-1:].expand(n - len(chunk))])
        h = 1e-6 * filled.abs().clamp_min(1.0)
        ys = []
        for sign in (1, -1):
            xs = [b.clone() for b in base]
            xs[t] = (filled + sign * h).to(x.dtype).reshape(x.shape)
            with torch.no_grad():
                (y,) = subject.select(subject.call(xs))
            ys.append(y.reshape(-1).to(torch.float64))
        out.append(((ys[0] - ys[1]) / (2 * h))[:len(chunk)])
    return torch.cat(out)


def bits(levels: int) -> int:
    """The bits a grid of ``levels`` values needs."""
    return max(1, math.ceil(math.log2(levels)))


def declaration(session: Session):
    """``@gradsmith.example(..., approximate=True)``, run here exactly as the pasted line runs
    it (the approximate check, on the check's inputs): verified when the gradient quality is
    within the thresholds with a margin of two (fresh inputs measure a little differently);
    ``max_relative_error`` is printed only where the default is not enough."""
    from gradsmith.checker import approximate
    from gradsmith.checker.suggest import Declaration, render_args

    options = session.options
    saved = options.approximate, options.max_relative_error, options.min_cosine
    options.approximate = True
    options.max_relative_error, options.min_cosine = _DEFAULTS
    try:
        findings = approximate.run(session)
    except Exception:  # noqa: BLE001 - user code: unverified then
        findings = []
    finally:
        options.approximate, options.max_relative_error, options.min_cosine = saved
    factory = f"lambda: {render_args(session.subject.args.values)}"
    measured = [f.details for f in findings if "relative_error" in (f.details or {})]
    rels = [d["relative_error"] for d in measured]
    coss = [d["cosine"] for d in measured]
    if not rels or not all(math.isfinite(r) for r in rels + coss):
        return Declaration(f"@gradsmith.example({factory}, approximate=True, "
                           "max_relative_error=...)", False,
                           "the relative error backward's rounding allows")
    worst, cos = max(rels), min(coss)
    extra = ""
    if 2 * worst > _DEFAULTS[0]:
        extra = f", max_relative_error={_round_up(3 * worst)}"
    verified = 1 - cos <= (1 - _DEFAULTS[1]) / 2
    return Declaration(
        f"@gradsmith.example({factory}, approximate=True{extra})", verified,
        f"measured here: relative error {worst:.3g}, cosine {cos:.6f}")


_DEFAULTS = (1e-2, 0.99)  # approximate mode's max_relative_error and min_cosine


def _round_up(value: float) -> str:
    """``value`` rounded up to one significant digit, as Python source."""
    exponent = math.floor(math.log10(value))
    digit = math.ceil(value / 10 ** exponent - 1e-9)
    return f"{digit * 10.0 ** exponent:.1g}"
