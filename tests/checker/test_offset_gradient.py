"""An identity forward whose backward adds one constant to the incoming gradient (issue 18,
corpus 13c held-out: bandlimited-cnns' ``ManipulateGradientStatic``, ``grad + 0.42``). Zero
configuration printed an ``intended=... ...`` template; now ``intended=lambda x, grad: grad +
0.42``, checked against backward, that passes as printed; a planted wrong offset FAILs."""

from __future__ import annotations

import pytest
import torch

import gradsmith
from gradsmith.discovery import synthesize


def _shift(returned):
    class Shift(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.view_as(x)

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return returned(x, grad)

    return Shift


RIGHT = _shift(lambda x, g: g + 0.42)


def _finding(fn):
    report = gradsmith.check(fn, *synthesize(fn).args, compat=False)
    assert not report.passed
    (finding,) = [f for f in report.errors if f.code == "undeclared-estimator"]
    return finding


def _apply(fn, line):
    factory, kwargs = eval(line.lstrip("@").replace("gradsmith.example(", "capture(", 1),  # noqa: S307
                           {"torch": torch, "capture": lambda f, **kw: (f, kw)})
    return gradsmith.check(fn, *factory(), compat=False, **kwargs)


@pytest.mark.parametrize("c,text", [(0.42, "grad + 0.42"), (-0.25, "grad - 0.25")])
def test_the_offset_is_printed_checked_and_passes_as_printed(c, text):
    fn = _shift(lambda x, g: g + c)
    finding = _finding(fn)
    line = finding.details["declaration"]
    assert finding.details["verified"] and line.endswith(f"intended=lambda x, grad: {text})"), line
    assert _apply(fn, line).passed
    # the independent reference: the printed rule is the closed form g + c for a fresh g
    g = torch.randn(7, dtype=torch.float64)
    intended = eval(line.split("intended=", 1)[1][:-1])  # noqa: S307
    torch.testing.assert_close(intended(g, g), g + c)


@pytest.mark.parametrize("returned", [lambda x, g: g + 0.5, lambda x, g: g - 0.42,
                                      lambda x, g: g + 0.42 * (x > 0)],
                         ids=["other offset", "opposite sign", "offset where x > 0 only"])
def test_a_planted_wrong_offset_fails_with_the_declaration(returned):
    line = _finding(RIGHT).details["declaration"]
    assert not _apply(_shift(returned), line).passed


def test_an_offset_read_from_the_input_is_not_printed_as_a_literal():
    """``grad + 0.42 * x.mean()``: one constant at the check's x only."""
    finding = _finding(_shift(lambda x, g: g + 0.42 * x.mean()))
    line = finding.details["declaration"]
    assert not (finding.details["verified"] and "grad + " in line and "x" not in
                line.split("grad:", 1)[-1]), line
