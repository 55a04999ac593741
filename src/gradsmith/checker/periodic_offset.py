"""A smooth staircase: the identity plus a periodic term, as a surrogate of rounding.

A rounding quantizer ``round(x n) / n`` (corpus 14b dev: the low-bitwidth project's
``ActRoundDifferentiableFunction``) passes back ``g * (1 - cos(2 pi n x) / beta)``: the
derivative of the smooth staircase ``x - sin(2 pi n x) / (2 pi n beta)``, largest at the
jumps and smallest on the plateaus. The periodic family of :mod:`gradsmith.checker.
surrogate_fit` fits a pure cosine only, so the line stayed a template. Here the cosine is
fitted to ``d - 1`` (what backward adds to the straight-through 1) and written as
``x - c * sin(s * x) / s``, with ``c`` and ``s`` each read from the forward's numbers where
they can be (``1 / beta``, ``2 * torch.pi * n``); the caller keeps a term only where it holds
on a spread of inputs and with each named number moved.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch


def terms(name: str, u: torch.Tensor, d: torch.Tensor, numbers: list[tuple[str, float]],
          fit_periodic, expressions, factor) -> Iterator[str]:
    """Surrogate terms ``name - c * torch.sin(s * name) / s`` whose derivative is the
    sampled ``d`` (``u`` the sampled values of input ``name``); none when ``d - 1`` is no
    cosine. ``fit_periodic``, ``expressions`` and ``factor`` are surrogate_fit's helpers."""
    if bool(((d - 1).abs() <= 1e-12).all()):
        return  # plain straight-through: the simple terms write it
    fit = fit_periodic(u, d - 1, torch.cos)
    if fit is None:
        return
    amplitude, slope = fit
    coefficient = amplitude * slope  # d - 1 = coefficient * cos(slope * u)
    sign = "-" if coefficient < 0 else "+"
    for s in expressions(slope, numbers):
        for c in expressions(abs(coefficient), numbers):
            scaled = f"{factor(c)} * " if c != "1" else ""
            yield (f"{name} {sign} {scaled}torch.sin({factor(s)} * {name}) / {factor(s)}")
