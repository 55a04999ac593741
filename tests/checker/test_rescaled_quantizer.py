"""A ternary quantizer whose scale is computed from its input (issue 18, corpus 5 dev: BiBERT's
TwnQuantizer): ``alpha * sign(w)`` with ``alpha`` the mean of the kept ``|w|`` per row, and a
straight-through backward clipped to the bounds. Moving one element moves ``alpha``, so finite
differences are not 0 and it was a gradient-mismatch with no declaration; now an
undeclared-estimator with a surrogate line checked against backward that passes as printed,
and with it in place a planted wrong backward FAILs. A smooth forward with a shared factor
(``w * mean(w)``) and a wrong backward stays a gradient-mismatch."""

from __future__ import annotations

import importlib.util
import re
import sys

import pytest
import torch

import gradsmith

TERNARY = """\
import torch

import gradsmith

{line}
class Ternary(torch.autograd.Function):
    @staticmethod
    def forward(ctx, w, bounds):
        ctx.save_for_backward(w, bounds)
        w = torch.where(w < bounds[1], w, bounds[1])
        w = torch.where(w > bounds[0], w, bounds[0])
        thres = (0.7 * w.abs().mean(dim=1)).view(-1, 1).expand_as(w)
        keep = (w.abs() > thres).float()
        alpha = ((keep * w).abs().sum(dim=1) / keep.sum(dim=1)).view(-1, 1)
        return {forward}

    @staticmethod
    def backward(ctx, grad_output):
        w, bounds = ctx.saved_tensors
        g = grad_output.clone()
        g[w.ge(bounds[1])] = 0
        g[w.le(bounds[{lo}])] = 0
        return {returned}, None
"""
RIGHT = {"forward": "alpha * (w > thres).float() - alpha * (w < -thres).float()",
         "lo": "0", "returned": "g"}
WRONG = {"upper bound on both sides": {"lo": "1"}, "doubled": {"returned": "2 * g"}}
HAND = ("@gradsmith.example(lambda: (torch.randn(3, 4, dtype=torch.float64, "
        "requires_grad=True), torch.tensor([-1.0, 1.0], dtype=torch.float64)))")


def _load(tmp_path, stem: str, text: str):
    path = tmp_path / f"{stem}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(f"rescaled_{stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _check(fn):
    torch.manual_seed(0)
    return gradsmith.check(fn, compat=False)


def _printed(tmp_path) -> str:
    report = _check(_load(tmp_path, "hand", TERNARY.format(line=HAND, **RIGHT)).Ternary)
    (finding,) = [f for f in report.errors if f.code == "undeclared-estimator"]
    assert finding.details["estimator"] == {"w": "straight-through-rescaled"}
    assert finding.details["verified"], finding.details["declaration"]
    return finding.details["declaration"]


def test_the_printed_line_is_the_clipped_rule_and_passes_as_printed(tmp_path):
    line = _printed(tmp_path)
    surrogate = eval(re.search(r"surrogate=(lambda .*)\)$", line).group(1),  # noqa: S307
                     {"torch": torch})
    # the independent reference: the straight-through rule clipped to the bounds, by hand
    w = (torch.linspace(-2, 2, 41, dtype=torch.float64) + 0.013).reshape(1, -1)
    w.requires_grad_()
    surrogate(w, torch.tensor([-1.0, 1.0], dtype=torch.float64)).sum().backward()
    torch.testing.assert_close(w.grad, ((w > -1) & (w < 1)).to(torch.float64))
    pasted = _load(tmp_path, "pasted", TERNARY.format(line=line, **RIGHT)).Ternary
    assert _check(pasted).passed


@pytest.mark.parametrize("kind", list(WRONG))
def test_a_planted_wrong_backward_fails_with_the_line_in_place(tmp_path, kind):
    line = _printed(tmp_path)
    mutant = _load(tmp_path, "mutant", TERNARY.format(line=line, **{**RIGHT, **WRONG[kind]}))
    report = _check(mutant.Ternary)
    assert not report.passed
    assert "surrogate-mismatch" in report.codes("error"), str(report)


def test_a_smooth_shared_factor_with_a_wrong_backward_stays_a_mismatch(tmp_path):
    # w * mean|w| per row: moving one element changes its own output by more than the
    # others' common share; backward g (inside the bounds) is simply wrong
    smooth = {**RIGHT, "forward": "w * w.abs().mean(dim=1, keepdim=True)"}
    report = _check(_load(tmp_path, "smooth", TERNARY.format(line=HAND, **smooth)).Ternary)
    assert "gradient-mismatch" in report.codes("error"), str(report)
    assert "undeclared-estimator" not in report.codes("error")
