"""An identity forward whose backward rounds the incoming gradient to a k-bit fixed-point grid
(issue 18, corpus 13b held-out: wageubn's ``GradOfBNQuant``). Zero configuration printed an
``intended=... ...`` template; now an ``intended=`` naming ``k`` as the grid, checked against
backward (and with ``k`` moved), that passes as printed; a planted wrong grid still FAILs."""

from __future__ import annotations

import pytest
import torch

import gradsmith


def _grid(step):
    class GradGrid(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            ctx.k = k
            return x.clone()

        @staticmethod
        def backward(ctx, grad):
            s = step(ctx.k)
            return torch.round(grad * s) / s, None

    return GradGrid


RIGHT = _grid(lambda k: 2 ** (k - 1))


def _args(k=3):
    return torch.randn(3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0)), k


def _printed(fn, k=3):
    report = gradsmith.check(fn, *_args(k), compat=False)
    assert not report.passed
    (finding,) = [f for f in report.errors if f.code == "undeclared-estimator"]
    return finding.details["declaration"], finding.details["verified"]


def _apply(fn, line):
    factory, kwargs = eval(line.lstrip("@").replace("gradsmith.example(", "capture(", 1),  # noqa: S307
                           {"torch": torch, "capture": lambda f, **kw: (f, kw)})
    return gradsmith.check(fn, *factory(), compat=False, **kwargs)


def test_the_fixed_point_grid_is_printed_checked_and_passes_as_printed():
    line, verified = _printed(RIGHT)
    assert verified and "torch.round(grad * 2 ** (k - 1)) / 2 ** (k - 1)" in line, line
    assert _apply(RIGHT, line).passed
    # the independent reference: the printed rule equals the closed form at another k
    intended = eval(line.split("intended=", 1)[1][:-1], {"torch": torch})  # noqa: S307
    g = torch.randn(5, dtype=torch.float64)
    got = intended(g, 5, g)[0]
    torch.testing.assert_close(got, torch.round(g * 16) / 16)


def test_a_grid_that_ignores_k_does_not_name_it():
    """``round(grad * 4) / 4`` whatever k: equal to the 2 ** (k - 1) grid at k = 3 only."""
    line, verified = _printed(_grid(lambda k: 4))
    assert not (verified and "k -" in line), line


@pytest.mark.parametrize("step", [lambda k: 2 ** k, lambda k: 2 ** (k - 2)],
                         ids=["one bit finer", "one bit coarser"])
def test_a_planted_wrong_grid_fails_with_the_declaration(step):
    line, _ = _printed(RIGHT)
    assert not _apply(_grid(step), line).passed
