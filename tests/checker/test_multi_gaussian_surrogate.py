"""The multi-Gaussian surrogate gradient of a spike (issue 18, corpus 4's adaptive-threshold
``ActFun_adp``; Yin et al. 2021): a centre Gaussian raised by ``h`` less two wide side
Gaussians at ``+-sigma``, times a scale, computed in float32. Zero configuration used to print
a ``surrogate=...`` template; now a surrogate checked against backward that passes as
printed, and with it in place a planted wrong backward FAILs."""

from __future__ import annotations

import importlib.util
import math
import re
import sys

import pytest
import torch

import gradsmith
from gradsmith.discovery import synthesize

SPIKE = """\
import math

import torch

import gradsmith


def gaussian(x, mu=0., sigma=.5):
    return torch.exp(-((x - mu) ** 2) / (2 * sigma ** 2)) / math.sqrt(2 * math.pi) / sigma

{line}
class AdaptiveSpike(torch.autograd.Function):
    @staticmethod
    def forward(ctx, v):
        ctx.save_for_backward(v)
        return v.gt(0).float()

    @staticmethod
    def backward(ctx, grad_output):
        (v,) = ctx.saved_tensors
        lens, hight, scale = {lens}, {hight}, {scale}
        temp = (gaussian(v, mu=0., sigma=lens) * (1. + hight)
                - gaussian(v, mu=lens, sigma=scale * lens) * hight
                - gaussian(v, mu=-lens, sigma=scale * lens) * hight)
        return grad_output * temp.float() * {gamma}
"""
RIGHT = {"lens": "0.5", "hight": "0.15", "scale": "6.0", "gamma": "0.5"}
WRONG = {"wrong height": {"hight": "0.3"}, "wrong side width": {"scale": "4.0"},
         "wrong width": {"lens": "0.4"}, "missing scale": {"gamma": "1.0"}}


def _load(tmp_path, stem: str, text: str):
    path = tmp_path / f"{stem}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(f"mg_{stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _printed(tmp_path) -> str:
    fn = _load(tmp_path, "plain", SPIKE.format(line="", **RIGHT)).AdaptiveSpike
    report = gradsmith.check(fn, *synthesize(fn).args, compat=False)
    (finding,) = [f for f in report.errors if f.code == "undeclared-estimator"]
    line = finding.details["declaration"]
    assert finding.details["verified"] and "..." not in line, line
    return line


def _gaussian(x, mu, sigma):
    return torch.exp(-((x - mu) ** 2) / (2 * sigma ** 2)) / math.sqrt(2 * math.pi) / sigma


def test_the_printed_surrogate_is_the_multi_gaussian_and_passes_as_printed(tmp_path):
    line = _printed(tmp_path)
    surrogate = eval(re.search(r"surrogate=(lambda .*)\)$", line).group(1),  # noqa: S307
                     {"torch": torch})
    # the independent reference: Yin et al.'s formula by hand, in float64
    x = torch.linspace(-5, 5, 201, dtype=torch.float64).requires_grad_()
    (got,) = torch.autograd.grad(surrogate(x).sum(), x)
    xd = x.detach()
    want = 0.5 * (1.15 * _gaussian(xd, 0, 0.5) - 0.15 * _gaussian(xd, 0.5, 3.0)
                  - 0.15 * _gaussian(xd, -0.5, 3.0))
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-9)
    torch.manual_seed(0)
    pasted = _load(tmp_path, "pasted", SPIKE.format(line=line, **RIGHT)).AdaptiveSpike
    assert gradsmith.check(pasted, compat=False).passed


@pytest.mark.parametrize("kind", list(WRONG))
def test_a_planted_wrong_backward_fails_with_the_line_in_place(tmp_path, kind):
    line = _printed(tmp_path)
    fn = _load(tmp_path, "mutant",
               SPIKE.format(line=line, **{**RIGHT, **WRONG[kind]})).AdaptiveSpike
    torch.manual_seed(0)
    assert "surrogate-mismatch" in gradsmith.check(fn, compat=False).codes("error")
