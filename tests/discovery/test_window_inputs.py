"""A straight-through estimator whose surrogate window around 0 is narrow (backward ``g / (2 *
eps)`` on ``|x| < eps``, 0 elsewhere) returns zeros at most standard-normal values: the row was
"never exercised" (corpus 12c held-out: auto_LiRPA's SignMergeFunction_tight, eps = 0.1). The
discovery then scales the inputs down into the window, sign kept, and says so; the estimator is
found, and the declaration printed for it passes as pasted, while a planted wrong backward
fails with that declaration in place. Reduced case written here; the independent reference is
autograd of the surrogate ``clamp(x / (2 eps) + 1/2, 0, 1)``, written by hand.
"""

from __future__ import annotations

import re

import torch
from torch.autograd import Function

import gradsmith
from gradsmith.discovery.synthesize import synthesize

EPS = 0.04


class Heaviside(Function):
    """A step 1[x > 0] whose backward is the slope of a ramp across |x| < EPS."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return (x > 0).to(x.dtype)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (x.abs() < EPS).to(g.dtype) / (2 * EPS)


class HeavisideHalved(Heaviside):
    """Planted wrong: half the ramp's slope."""

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (x.abs() < EPS).to(g.dtype) / (4 * EPS)


def _ramp(x):
    return (x / (2 * EPS) + 0.5).clamp(0, 1)


def test_inputs_are_scaled_into_the_window_and_said():
    found = synthesize(Heaviside)
    assert "x * 0." in found.description, found.description
    (x,) = found.args
    assert bool((x.abs() < EPS).any())  # backward is exercised there
    (got,) = torch.autograd.grad(Heaviside.apply(x).sum(), x)
    y = x.detach().clone().requires_grad_(True)
    (want,) = torch.autograd.grad(_ramp(y).sum(), y)
    torch.testing.assert_close(got, want)


def _printed(fn) -> str:
    report = gradsmith.check(fn, *synthesize(fn).args, compat=False)
    assert "not-exercised" not in report.codes("warning"), report
    (finding,) = [f for f in report.errors if f.code == "undeclared-estimator"]
    return finding.details["declaration"]


def test_the_printed_declaration_draws_in_the_window_and_passes():
    line = _printed(Heaviside)
    assert "* torch.randn(" in line, line
    factory = eval(re.search(r"example\((lambda: .*), surrogate=", line).group(1),  # noqa: S307
                   {"torch": torch})
    surrogate = eval(re.search(r"surrogate=(lambda .*)\)$", line).group(1),  # noqa: S307
                     {"torch": torch})
    torch.manual_seed(0)
    report = gradsmith.check(Heaviside, *factory(), surrogate=surrogate, compat=False)
    assert report.passed, report
    torch.manual_seed(0)
    report = gradsmith.check(Heaviside, *factory(), surrogate=_ramp, compat=False)
    assert report.passed, report  # the hand-written surrogate agrees


def test_a_planted_wrong_backward_fails():
    found = synthesize(HeavisideHalved)
    report = gradsmith.check(HeavisideHalved, *found.args, surrogate=_ramp, compat=False)
    assert "surrogate-mismatch" in report.codes("error"), report
    report = gradsmith.check(HeavisideHalved, *found.args, compat=False)
    assert not report.passed
