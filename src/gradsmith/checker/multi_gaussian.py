"""The multi-Gaussian surrogate gradient of a spike (Yin et al. 2021), fitted to backward.

A spiking neuron's backward (corpus 4's adaptive-threshold ``ActFun_adp``) may return a
centred Gaussian of width ``sigma`` raised by ``h`` less two wide side Gaussians at
``+-sigma`` of width ``s * sigma`` (``h = 0.15``, ``s = 6``), times a scale: a sum no single
family of :mod:`gradsmith.checker.surrogate_fit` has. Its surrogate is the same sum of
``erf`` terms (each Gaussian's integral)::

    A * erf(x / (sigma * 2 ** 0.5)) + B * (erf((x - sigma) / (s * sigma * 2 ** 0.5))
                                         + erf((x + sigma) / (s * sigma * 2 ** 0.5)))

``sigma`` is searched on a log grid and refined, ``s`` among small integers; ``A`` and ``B``
follow by least squares; ``sigma`` is printed with the fewest digits that still fit.

References:
    Yin, Corradi, Bohte: Accurate and efficient time-domain classification with adaptive
    spiking recurrent neural networks, Nature Machine Intelligence 3, 905-913, 2021.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch

from gradsmith.checker.slope_fit import FIT

SIDE_WIDTHS = (2, 3, 4, 5, 6, 8, 10)
_SIGMAS = torch.logspace(-1.7, 1.3, 151, dtype=torch.float64)


def terms(name: str, u: torch.Tensor, d: torch.Tensor) -> Iterator[str]:
    """The surrogate of ``name`` (``u`` its values, ``d`` backward's derivative there), if
    a multi-Gaussian with side Gaussians fits ``d``."""
    scale = float(d.abs().max()) if d.numel() else 0.0
    if scale == 0 or d.numel() < 8:
        return
    found = _fit(u, d, scale)
    if found is None:
        return
    sigma, s, a, b = found
    root = math.sqrt(math.pi / 2)
    big, side = a * sigma * root, b * s * sigma * root
    w1, w2 = f"({_text(sigma)} * 2 ** 0.5)", f"({_text(s * sigma)} * 2 ** 0.5)"
    sides = (f"(torch.erf(({name} - {_text(sigma)}) / {w2}) + "
             f"torch.erf(({name} + {_text(sigma)}) / {w2}))")
    sign = "-" if side < 0 else "+"
    amp, other = _text(big, 1e-7), _text(abs(side), 1e-7)  # float32 derivatives: 7 digits
    yield f"{amp} * torch.erf({name} / {w1}) {sign} {other} * {sides}"


def _fit(u, d, scale) -> tuple[float, int, float, float] | None:
    best = None
    for s in SIDE_WIDTHS:
        errors, _, _ = _residuals(_SIGMAS, s, u, d, scale)
        k = int(torch.argmin(errors))
        lo = math.log(float(_SIGMAS[max(k - 1, 0)]))
        hi = math.log(float(_SIGMAS[min(k + 1, len(_SIGMAS) - 1)]))
        for _ in range(6):  # finer grids around the best, each 16 times narrower
            logs = torch.linspace(lo, hi, 33, dtype=torch.float64)
            errors, _, _ = _residuals(logs.exp(), s, u, d, scale)
            k = int(torch.argmin(errors))
            lo, hi = float(logs[max(k - 1, 0)]), float(logs[min(k + 1, 32)])
        sigma = math.exp((lo + hi) / 2)
        err, a, b = _one(sigma, s, u, d, scale)
        if err <= FIT and b != 0 and (best is None or err < best[0]):
            best = (err, sigma, s, a, b)
    if best is None:
        return None
    _, sigma, s, a, b = best
    for digits in range(1, 8):  # the shortest sigma that still fits (0.5, not 0.4999999)
        short = float(f"{sigma:.{digits}g}")
        err, a2, b2 = _one(short, s, u, d, scale)
        if err <= FIT:
            return short, s, a2, b2
    return sigma, s, a, b


def _one(sigma: float, s: int, u, d, scale) -> tuple[float, float, float]:
    errors, a, b = _residuals(torch.tensor([sigma], dtype=torch.float64), s, u, d, scale)
    return float(errors[0]), float(a[0]), float(b[0])


def _residuals(sigmas: torch.Tensor, s: int, u, d, scale):
    """Per ``sigma``: the largest residual (relative to ``max |d|``) of the least-squares
    amplitudes of the centre and side Gaussians, and those amplitudes (normal equations,
    all ``sigmas`` at once)."""
    sg = sigmas.unsqueeze(1)
    centre = torch.exp(-u * u / (2 * sg * sg))
    w = 2 * (s * sg) ** 2
    sides = torch.exp(-(u - sg) ** 2 / w) + torch.exp(-(u + sg) ** 2 / w)
    cc, cs, ss = (centre * centre).sum(1), (centre * sides).sum(1), (sides * sides).sum(1)
    cd, sd = (centre * d).sum(1), (sides * d).sum(1)
    det = cc * ss - cs * cs
    a = (ss * cd - cs * sd) / det
    b = (cc * sd - cs * cd) / det
    err = (a.unsqueeze(1) * centre + b.unsqueeze(1) * sides - d).abs().amax(1) / scale
    err = torch.where(torch.isfinite(err) & (det.abs() > 1e-300), err, math.inf)
    return err, a, b


def _text(value: float, rel: float = 1e-9) -> str:
    """The shortest decimal within ``rel`` (relative) of ``value``."""
    for digits in range(1, 18):
        text = f"{value:.{digits}g}"
        if math.isclose(float(text), value, rel_tol=rel, abs_tol=0.0):
            return text
    return repr(value)
