"""An incoming gradient rounded to a fixed-point grid a forward number sets.

WAGE-style training quantises gradients: an identity forward whose backward returns
``round(grad * 2 ** (k - 1)) / 2 ** (k - 1)``, the gradient on the grid of a ``k``-bit signed
fixed-point number (wageubn's ``GradOfBNQuant``, corpus 13b held-out, issue 18). It is a
modification of the gradient like a clip, but no clip, mask or centring reproduces it, so the
estimator got an ``intended=... ...`` template that cannot pass as printed.

The candidates name the forward's numbers as the grid: ``2 ** (k - 1)`` and ``2 ** k`` steps
per unit (the signed and unsigned ``k``-bit grids), then ``k`` itself (a count of levels).
Each is only a candidate: the caller runs it against backward, for a second incoming
gradient, and with ``k`` moved (:mod:`gradsmith.checker.moved_numbers`), so a grid that
agrees at the example's ``k`` only by luck is not printed as checked.
"""

from __future__ import annotations


def candidates(grad: str, numbers: list[tuple[str, float]]) -> list[str]:
    """``torch.round(grad * s) / s`` for each grid ``s`` a positive forward number sets.

    Example:
        >>> candidates("grad", [("k", 4.0)])[0]
        'torch.round(grad * 2 ** (k - 1)) / 2 ** (k - 1)'
    """
    out = []
    for p, value in numbers:
        if value <= 0:
            continue
        for s in (f"2 ** ({p} - 1)", f"2 ** {p}", p):
            out.append(f"torch.round({grad} * {s}) / {s}")
    return out
