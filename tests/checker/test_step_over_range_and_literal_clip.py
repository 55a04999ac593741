"""Two estimator families that got a template to complete (issue 18, corpus 11b dev): LSQ
written with the levels' range (``round(clamp(x r / s, lo, hi)) s / r``: the learned step is
``s / r``, ZouJiu1's ``FunLSQ``) and a gradient clipped to literal bounds (``grad.clamp(-0.5,
0.5)`` behind an identity forward, LorentzDNN's ``scale_grad``). Zero configuration now prints
a line it ran against backward that passes when pasted exactly as printed, whose gradient is
the family's (by hand, below), and with which a planted wrong backward still FAILs. Reduced
cases written for this test, not the projects' code."""

from __future__ import annotations

import importlib.util
import re
import sys

import pytest
import torch

import gradsmith

HEADER = "import torch\nfrom torch.autograd import Function\n\nimport gradsmith\n\n\n"

STEP_OVER_RANGE = """
class RangeLSQ(Function):
    @staticmethod
    def forward(ctx, x, s, r, g, lo, hi):
        ctx.save_for_backward(x, s)
        ctx.other = r, g, lo, hi
        return torch.round((x * r / s).clamp(lo, hi)) / r * s

    @staticmethod
    def backward(ctx, grad):
        x, s = ctx.saved_tensors
        r, g, lo, hi = ctx.other
        q = x * r / s
        below, above = (q < lo).double(), (q > hi).double()
        inside = 1.0 - below - above
        ds = below * lo / r + above * hi / r + inside * (torch.round(q) / r - x / s)
        return inside * grad, (ds * grad * {g}).sum().reshape(s.shape), None, None, None, None
"""

LITERAL_CLIP = """
class ClipGrad(Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad.clamp(-{c}, {c})
"""


def _x(seed: int, scale: float) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return (scale * torch.randn(3, 5, generator=gen, dtype=torch.float64)).requires_grad_()


CASES = {
    "RangeLSQ": (STEP_OVER_RANGE, {"g": "g"}, {"g": "1.0"},
                 lambda: (_x(0, 2.0), torch.tensor([1.0], dtype=torch.float64,
                                                   requires_grad=True), 4.0, 0.5, -4, 3)),
    "ClipGrad": (LITERAL_CLIP, {"c": "0.25"}, {"c": "0.5"}, lambda: (_x(1, 1.0),)),
}


def _load(tmp_path, stem: str, text: str):
    path = tmp_path / f"{stem}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(f"range_clip_{stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _printed(tmp_path, name):
    template, right, _, inputs = CASES[name]
    fn = getattr(_load(tmp_path, "plain", HEADER + template.format(**right)), name)
    report = gradsmith.check(fn, *inputs(), compat=False)
    found = [f for f in report.errors if f.code == "undeclared-estimator"]
    assert found, str(report)
    return found[0].details["declaration"], found[0]


@pytest.mark.parametrize("name", list(CASES))
def test_the_printed_line_is_checked_and_passes_as_printed(tmp_path, name):
    line, finding = _printed(tmp_path, name)
    assert finding.details["verified"] and "..." not in line, line
    template, right, _, _ = CASES[name]
    pasted = getattr(_load(tmp_path, "pasted", HEADER + line + template.format(**right)), name)
    again = gradsmith.check(pasted, compat=False)
    assert again.passed, f"{line}\n{again}"


def test_the_range_step_surrogate_is_lsq(tmp_path):
    """LSQ's rule by hand (Esser et al. 2020) with the step ``s / r``: ``x`` passes inside
    the window, ``s`` gets ``g * sum(grad * (lo / r | hi / r | round(q) / r - x / s))``."""
    line, _ = _printed(tmp_path, "RangeLSQ")
    surrogate = eval(re.search(r"surrogate=(lambda .*)\)$", line).group(1),  # noqa: S307
                     {"torch": torch})
    gen = torch.Generator().manual_seed(3)
    for scale in (0.3, 1.0, 3.0):
        x = (scale * torch.randn(3, 5, generator=gen, dtype=torch.float64)).requires_grad_()
        s = torch.tensor([0.7], dtype=torch.float64, requires_grad=True)
        r, g, lo, hi = 4.0, 0.5, -4, 3
        out = surrogate(x, s, r, g, lo, hi)
        v = torch.randn(out.shape, generator=gen, dtype=out.dtype)
        got = torch.autograd.grad(out, (x, s), v)
        q = (x * r / s).detach()
        inside = (q >= lo) & (q <= hi)
        ds = torch.where(q < lo, lo / r, torch.where(q > hi, hi / r, q.round() / r - q / r))
        torch.testing.assert_close(got[0], v * inside, rtol=1e-9, atol=1e-12)
        torch.testing.assert_close(got[1], (g * v * ds).sum().reshape(1), rtol=1e-9,
                                   atol=1e-12)


def test_the_printed_clip_bounds_are_the_literal_ones(tmp_path):
    line, _ = _printed(tmp_path, "ClipGrad")
    assert line.endswith("intended=lambda x, grad: grad.clamp(-0.25, 0.25))"), line


@pytest.mark.parametrize("name", list(CASES))
def test_a_planted_wrong_backward_fails_with_the_declaration_in_place(tmp_path, name):
    line, _ = _printed(tmp_path, name)
    template, _, wrong, _ = CASES[name]
    mutant = getattr(_load(tmp_path, "mutant", HEADER + line + template.format(**wrong)), name)
    report = gradsmith.check(mutant, compat=False)
    assert not report.passed
    assert {"surrogate-mismatch", "intended-mismatch"} & report.codes("error"), str(report)
