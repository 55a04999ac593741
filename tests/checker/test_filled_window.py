"""A gradient replaced by constants outside a window (issue 18, corpus 4's nni ``ramp``):
forward clamps to ``[0, 1]``, backward writes ``0.01`` below 0 and ``-0.01`` above 1
whatever the incoming gradient. Zero configuration used to print a ``surrogate=...``
template (no surrogate has that gradient); now an ``intended=`` line checked against
backward, that passes as printed, and with it in place a planted wrong backward FAILs."""

from __future__ import annotations

import importlib.util
import re
import sys

import pytest
import torch

import gradsmith
from gradsmith.discovery import synthesize

RAMP = """\
import torch
from torch.autograd import Function

import gradsmith

{line}
class Ramp(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clamp(min=0, max=1)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        out = {inside}
        out[x < 0] = {below}
        out[x > {top}] = -1e-2
        return out
"""
RIGHT = {"inside": "grad.clone()", "below": "1e-2", "top": "1"}
WRONG = {"wrong constant": {"below": "2e-2"},
         "wrong window": {"top": "1.5"},
         "wrong slope inside": {"inside": "2 * grad"}}


def _load(tmp_path, stem: str, text: str):
    path = tmp_path / f"{stem}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(f"filled_{stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _printed(tmp_path) -> str:
    fn = _load(tmp_path, "plain", RAMP.format(line="", **RIGHT)).Ramp
    report = gradsmith.check(fn, *synthesize(fn).args, compat=False)
    (finding,) = [f for f in report.errors if f.code == "undeclared-estimator"]
    assert finding.details["verified"], finding.details["declaration"]
    return finding.details["declaration"]


def test_the_printed_intended_line_is_the_rule_and_passes_as_printed(tmp_path):
    line = _printed(tmp_path)
    assert "..." not in line
    # the independent reference: the rule by hand, on values across the window
    intended = eval(re.search(r"intended=(lambda .*)\)$", line).group(1),  # noqa: S307
                    {"torch": torch})
    x = torch.linspace(-2, 3, 51, dtype=torch.float64) + 0.013
    grad = torch.randn(51, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    want = torch.where(x < 0, torch.full_like(x, 0.01),
                       torch.where(x > 1, torch.full_like(x, -0.01), grad))
    torch.testing.assert_close(intended(x, grad), want)
    torch.manual_seed(0)
    pasted = _load(tmp_path, "pasted", RAMP.format(line=line, **RIGHT)).Ramp
    assert gradsmith.check(pasted, compat=False).passed


@pytest.mark.parametrize("kind", list(WRONG))
def test_a_planted_wrong_backward_fails_with_the_line_in_place(tmp_path, kind):
    line = _printed(tmp_path)
    fn = _load(tmp_path, "mutant", RAMP.format(line=line, **{**RIGHT, **WRONG[kind]})).Ramp
    torch.manual_seed(0)
    report = gradsmith.check(fn, compat=False)
    assert "intended-mismatch" in report.codes("error"), str(report)
