"""The slope ``p`` and amplitude ``A`` of a smooth surrogate gradient ``d = A p F'(p u)`` fitted
to what backward returned (see :mod:`gradsmith.checker.surrogate_fit`), by a least-squares
amplitude per slope and a search over slopes that evaluates many slopes in one tensor expression.
"""

from __future__ import annotations

import math

import torch

FIT = 1e-7  # largest relative residual of an accepted fit
_GRID = torch.logspace(-3, 3, 601, dtype=torch.float64)


def fit_smooth(u: torch.Tensor, d: torch.Tensor, deriv) -> tuple[float, float] | None:
    """``(A, p)`` with ``d = A p F'(p u)`` within :data:`FIT`, or None.

    The residual is evaluated for many slopes at once (one tensor expression per batch, not one
    per slope): the log-spaced grid, then rounds of finer grids around the best slope, each
    narrowing the bracket 16-fold, to the precision of a float64 ``log(p)``. A scalar search
    (601 + 160 evaluations) cost ~30 ms per family and input; this is ~15 batched evaluations.
    """
    scale = float(d.abs().max())
    errors = _residuals(_GRID, u, d, scale, deriv)
    best = int(torch.argmin(errors))
    lo = math.log(float(_GRID[max(best - 1, 0)]))
    hi = math.log(float(_GRID[min(best + 1, len(_GRID) - 1)]))
    for _ in range(_ROUNDS):
        logs = torch.linspace(lo, hi, _REFINE, dtype=torch.float64)
        errors = _residuals(logs.exp(), u, d, scale, deriv)
        best = int(torch.argmin(errors))
        lo, hi = float(logs[max(best - 1, 0)]), float(logs[min(best + 1, _REFINE - 1)])
        if hi - lo <= 4 * math.ulp(max(abs(lo), abs(hi), 1.0)):
            break
    p = math.exp((lo + hi) / 2)
    err, c = _residual(p, u, d, scale, deriv)
    if err > FIT or c == 0:
        return None
    return c / p, p


def fit_screened(u: torch.Tensor, d: torch.Tensor, deriv) -> tuple[float, float] | None:
    """:func:`fit_smooth`, after a screen that rejects a ``d`` whose signs no slope can give
    (for a fixed family ``deriv``: its sign test is remembered per function object)."""
    if _breaks_sign(u, d, float(d.abs().max()), deriv):
        return None
    return fit_smooth(u, d, deriv)


def _sign_fixed(deriv) -> bool:
    """Whether the sign of family derivative ``F'(p u)`` is the same for every slope ``p > 0``
    (it depends on the sign of ``u`` only: sigmoid's, a Gaussian's, a tanh's; not a cosine's),
    checked on a wide probe and remembered per family. Then ``d = A p F'(p u)`` has the sign
    of ``A F'(u)`` wherever both are non-zero, and a ``d`` that breaks this fits no slope: the
    search (half a second for a batch norm's nine shifted inputs with four tensor arguments
    each) is spared."""
    known = _SIGN_FIXED.get(deriv)
    if known is None:
        with torch.no_grad():
            signs = torch.stack([torch.sign(deriv(_PROBE * k)) for k in (1e-2, 1e-1, 1, 10)])
        known = _SIGN_FIXED[deriv] = not bool(((signs > 0).any(0) & (signs < 0).any(0)).any())
    return known


def _breaks_sign(u: torch.Tensor, d: torch.Tensor, scale: float, deriv) -> bool:
    """Whether ``d`` times the sign of ``F'(u)`` takes both signs (beyond :data:`FIT`)."""
    if not _sign_fixed(deriv):
        return False
    w = d * torch.sign(deriv(u))
    return bool((w > FIT * scale).any()) and bool((w < -FIT * scale).any())


_PROBE = torch.linspace(-30, 30, 241, dtype=torch.float64)
_SIGN_FIXED: dict = {}
_REFINE = 33  # points per refinement round: the bracket (two neighbours) shrinks 16-fold
_ROUNDS = 12  # 0.046 (two grid steps in log p) / 16**12: below a float64 ulp of log(p)
_BATCH_ELEMENTS = 1 << 20  # slopes x sample points evaluated in one tensor expression


def _residual(p: float, u: torch.Tensor, d: torch.Tensor, scale: float,
              deriv) -> tuple[float, float]:
    """Largest residual of the best amplitude at slope ``p``, relative to ``max |d|``, and that
    amplitude ``c`` (``d ~ c F'(p u)``); ``inf`` where ``F'(p u)`` vanishes or overflows."""
    phi = deriv(p * u)
    den = float((phi * phi).sum())
    if den == 0 or not math.isfinite(den):
        return math.inf, 0.0
    c = float((phi * d).sum()) / den
    return float((d - c * phi).abs().max()) / scale, c


def _residuals(slopes: torch.Tensor, u: torch.Tensor, d: torch.Tensor, scale: float,
               deriv) -> torch.Tensor:
    """:func:`_residual`'s first value for every slope, batched (rows of slopes times
    sample points, at most :data:`_BATCH_ELEMENTS` at a time)."""
    rows = max(1, _BATCH_ELEMENTS // max(u.numel(), 1))
    out = []
    for chunk in slopes.split(rows):
        phi = deriv(chunk[:, None] * u[None, :])
        den = (phi * phi).sum(dim=1)
        c = (phi * d).sum(dim=1) / den
        err = (d - c[:, None] * phi).abs().amax(dim=1) / scale
        bad = (den == 0) | ~torch.isfinite(den) | torch.isnan(err)
        out.append(torch.where(bad, math.inf, err))
    return torch.cat(out)
