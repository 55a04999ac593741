"""The sign screen in front of the smooth surrogate fit (issue 18: a batch norm with five
same-shaped tensor arguments spent 20 of its 27 s in slope searches that could not fit): a
derivative ``d`` whose signs no slope of a family gives is rejected without the search, and
every fit the search finds is still found."""

from __future__ import annotations

import math

import pytest
import torch

from gradsmith.checker import slope_fit, surrogate_fit

U = torch.cat([torch.linspace(-4, 4, 81, dtype=torch.float64),
               torch.tensor([-30.0, 30.0], dtype=torch.float64)])


@pytest.mark.parametrize("family", list(surrogate_fit.SMOOTH))
def test_the_screen_keeps_every_fit(family):
    _, deriv = surrogate_fit.SMOOTH[family]
    for amplitude, slope in ((1.0, 1.0), (-0.5, 25.0), (3.0, 0.3), (2.0, math.pi)):
        d = amplitude * slope * deriv(slope * U)
        assert slope_fit.fit_screened(U, d, deriv) == slope_fit.fit_smooth(U, d, deriv)
        assert slope_fit.fit_screened(U, d, deriv) is not None


@pytest.mark.parametrize("family", list(surrogate_fit.SMOOTH))
def test_signs_no_slope_gives_are_rejected_without_a_search(family):
    _, deriv = surrogate_fit.SMOOTH[family]
    slope_fit.fit_screened(U, deriv(U), deriv)  # the family's sign test, remembered
    calls = []

    def counted(u):
        calls.append(u.shape)
        return deriv(u)

    # an odd family's sign pattern flipped on one side; an even one's given both signs
    d = deriv(U) * torch.where(U > 2, -1.0, 1.0)
    slope_fit._SIGN_FIXED[counted] = slope_fit._SIGN_FIXED[deriv]
    try:
        assert slope_fit.fit_screened(U, d, counted) is None
    finally:
        del slope_fit._SIGN_FIXED[counted]
    assert slope_fit.fit_smooth(U, d, deriv) is None  # the search agrees, at its full cost
    assert len(calls) <= 1


def test_a_periodic_family_is_not_screened():
    assert not slope_fit._sign_fixed(torch.cos)
    d = 2.0 * torch.cos(0.5 * U[:81])
    assert slope_fit.fit_screened(U[:81], d, torch.cos) is not None
