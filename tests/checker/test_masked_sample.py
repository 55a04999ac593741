"""A Bernoulli sample's straight-through estimator masked by the sample (issue 18, corpus 4's
hidden-networks ``BinomialSample``): backward passes the gradient where the sample is 1.
Zero configuration used to print a ``surrogate=...`` template; the surrogate now calls the
Function itself (run from forward's random state, it draws the same sample), is checked
against backward and passes as printed, and with it in place a planted wrong backward
FAILs."""

from __future__ import annotations

import importlib.util
import re
import sys

import pytest
import torch

import gradsmith
from gradsmith.discovery import synthesize

SAMPLE = """\
import torch
from torch.autograd import Function

import gradsmith

{line}
class MaskedSample(Function):
    @staticmethod
    def forward(ctx, scores):
        out = (torch.rand_like(scores) < scores).float()
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (sample,) = ctx.saved_tensors
        g = {scale} * grad.clone()
        g[sample == {dropped}] = 0.0
        return g
"""
RIGHT = {"scale": "1.0", "dropped": "0.0"}
WRONG = {"inverted mask": {"dropped": "1.0"}, "wrong slope": {"scale": "2.0"}}


def _load(tmp_path, stem: str, text: str):
    path = tmp_path / f"{stem}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(f"masked_{stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _printed(tmp_path):
    fn = _load(tmp_path, "plain", SAMPLE.format(line="", **RIGHT)).MaskedSample
    report = gradsmith.check(fn, *synthesize(fn).args, compat=False)
    (finding,) = [f for f in report.errors if f.code == "undeclared-estimator"]
    line = finding.details["declaration"]
    assert finding.details["verified"] and "..." not in line, line
    return fn, line


def test_the_printed_surrogate_masks_by_the_sample_and_passes_as_printed(tmp_path):
    fn, line = _printed(tmp_path)
    surrogate = eval(re.search(r"surrogate=(lambda .*)\)$", line).group(1),  # noqa: S307
                     {"torch": torch, "MaskedSample": fn})
    # the independent reference: with the same random state, the gradient is the sample
    p = torch.rand(50, dtype=torch.float64, requires_grad=True)
    torch.manual_seed(3)
    (got,) = torch.autograd.grad(surrogate(p).sum(), p)
    torch.manual_seed(3)
    sample = (torch.rand_like(p) < p).to(p.dtype)
    torch.testing.assert_close(got, sample)
    torch.manual_seed(0)
    pasted = _load(tmp_path, "pasted", SAMPLE.format(line=line, **RIGHT)).MaskedSample
    assert gradsmith.check(pasted, compat=False).passed


@pytest.mark.parametrize("kind", list(WRONG))
def test_a_planted_wrong_backward_fails_with_the_line_in_place(tmp_path, kind):
    _, line = _printed(tmp_path)
    fn = _load(tmp_path, "mutant",
               SAMPLE.format(line=line, **{**RIGHT, **WRONG[kind]})).MaskedSample
    torch.manual_seed(0)
    assert "surrogate-mismatch" in gradsmith.check(fn, compat=False).codes("error")
