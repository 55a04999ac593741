"""An estimator with two outputs whose backward ignores one gradient (issue 18, corpus 4's
micronet ``Ternary``: the ternarised weight and its threshold ``0.7 * mean |w|``; backward
passes the first gradient straight through and drops the threshold's). Zero configuration
reported a gradient-mismatch and no line; now a surrogate checked against backward that
passes as printed, and with it in place a planted wrong backward FAILs. Dropping an output's
gradient beside a smooth output stays a gradient-mismatch (the classic slip)."""

from __future__ import annotations

import importlib.util
import re
import sys

import pytest
import torch

import gradsmith
from gradsmith.discovery import synthesize

TERNARY = """\
import torch
from torch.autograd import Function

import gradsmith

{line}
class ThreeLevel(Function):
    @staticmethod
    def forward(ctx, w):
        ctx.save_for_backward(w)
        threshold = torch.mean(torch.abs(w), (3, 2, 1), keepdim=True) * 0.7
        out = torch.sign(torch.sign(w + threshold) + torch.sign(w - threshold))
        return out, threshold

    @staticmethod
    def backward(ctx, grad, grad_threshold):
        (w,) = ctx.saved_tensors
        return {returned}
"""
RIGHT = "grad.clone()"
WRONG = {"wrong slope": "2 * grad", "wrong window": "grad * (w.abs() <= 1).to(grad.dtype)",
         "the other output's gradient too": "grad + grad_threshold"}

SMOOTH = """\
import torch
from torch.autograd import Function


class WithAux(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.tanh(x), x.abs().mean(-1, keepdim=True)

    @staticmethod
    def backward(ctx, grad, grad_aux):
        (x,) = ctx.saved_tensors
        return grad * (1 - torch.tanh(x) ** 2)
"""


def _load(tmp_path, stem: str, text: str):
    path = tmp_path / f"{stem}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(f"ignored_{stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _printed(tmp_path):
    fn = _load(tmp_path, "plain", TERNARY.format(line="", returned=RIGHT)).ThreeLevel
    report = gradsmith.check(fn, *synthesize(fn).args, compat=False)
    (finding,) = [f for f in report.errors if f.code == "undeclared-estimator"]
    line = finding.details["declaration"]
    assert finding.details["verified"] and "..." not in line, line
    assert "gradient-mismatch" not in report.codes("error")
    return fn, line


def test_the_printed_surrogate_drops_the_threshold_and_passes_as_printed(tmp_path):
    fn, line = _printed(tmp_path)
    surrogate = eval(re.search(r"surrogate=(lambda .*)\)$", line).group(1),  # noqa: S307
                     {"torch": torch, "ThreeLevel": fn})
    # the independent reference: identity for the weight's gradient, nothing through the
    # threshold, whatever the threshold's incoming gradient
    w = torch.randn(2, 3, 4, 5, dtype=torch.float64, requires_grad=True)
    out, threshold = surrogate(w)
    assert not threshold.requires_grad
    v = torch.randn_like(out)
    (got,) = torch.autograd.grad(out, w, v)
    torch.testing.assert_close(got, v)
    torch.manual_seed(0)
    pasted = _load(tmp_path, "pasted", TERNARY.format(line=line, returned=RIGHT)).ThreeLevel
    assert gradsmith.check(pasted, compat=False).passed


@pytest.mark.parametrize("kind", list(WRONG))
def test_a_planted_wrong_backward_fails_with_the_line_in_place(tmp_path, kind):
    _, line = _printed(tmp_path)
    fn = _load(tmp_path, "mutant", TERNARY.format(line=line, returned=WRONG[kind])).ThreeLevel
    torch.manual_seed(0)
    assert "surrogate-mismatch" in gradsmith.check(fn, compat=False).codes("error")


def test_a_dropped_gradient_beside_a_smooth_output_stays_a_gradient_mismatch(tmp_path):
    fn = _load(tmp_path, "smooth", SMOOTH).WithAux
    report = gradsmith.check(fn, torch.randn(3, 4, dtype=torch.float64, requires_grad=True),
                             compat=False)
    assert "gradient-mismatch" in report.codes("error")
    assert "undeclared-estimator" not in report.codes("error")
