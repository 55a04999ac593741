"""A spike whose triangular surrogate takes its width from a tensor argument (issue 18, corpus
9b held-out ``TTFSSpikeFunction``: ``clamp(1 - |m - thr| / slope, min=0)``, ``slope`` a tensor
synthesised per element, some widths negative) printed a template. Now the triangle is fitted
as the code writes it, with ``slope`` read from the argument: checked, it passes pasted as
printed and its autograd is the hand-written triangle at widths of both signs; a backward with
twice the width FAILs under it. Where backward also drops the gradient of a threshold forward
compares with (the estimator defect: a learnable threshold that never learns), the printed
line states forward's surrogate, unchecked, saying so: applied, it FAILs the defective
Function and PASSes one whose backward returns the threshold's gradient.

Reduced cases written here.
"""

from __future__ import annotations

import importlib.util
import re
import sys

import torch

import gradsmith
from gradsmith.discovery.synthesize import synthesize

HEADER = "import torch\nfrom torch.autograd import Function\nimport gradsmith\n\n"

WIDTH = """
class Tri(Function):
    @staticmethod
    def forward(ctx, m, slope):
        ctx.save_for_backward(m, slope)
        return (m >= 0).to(m.dtype)

    @staticmethod
    def backward(ctx, g):
        m, slope = ctx.saved_tensors
        return g * torch.clamp(1.0 - torch.abs(m) / ({k} * slope), min=0.0), None
"""

THRESHOLD = """
class Tri(Function):
    @staticmethod
    def forward(ctx, m, thr, slope):
        ctx.save_for_backward(m, thr, slope)
        return (m >= thr).to(m.dtype)

    @staticmethod
    def backward(ctx, g):
        m, thr, slope = ctx.saved_tensors
        d = g * torch.clamp(1.0 - torch.abs(m - thr) / slope, min=0.0)
        return d, {thr_grad}, None
"""


def _load(tmp_path, stem: str, text: str):
    path = tmp_path / f"{stem}.py"
    path.write_text(HEADER + text)
    spec = importlib.util.spec_from_file_location(f"width_{stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.Tri


def _finding(fn, *args):
    torch.manual_seed(0)
    report = gradsmith.check(fn, *args, compat=False)
    (finding,) = [f for f in report.errors if f.code == "undeclared-estimator"]
    return finding


def _pasted(line: str, source: str) -> str:
    return source.replace("class Tri", line + "\nclass Tri")


def _check(tmp_path, stem, text):
    torch.manual_seed(0)
    return gradsmith.check(_load(tmp_path, stem, text), compat=False)


def test_a_width_read_from_a_tensor_argument(tmp_path):
    fn = _load(tmp_path, "width", WIDTH.format(k="1"))
    args = synthesize(fn).args
    assert bool((args[1] < 0).any()) and bool((args[1] > 0).any())  # widths of both signs
    finding = _finding(fn, *args)
    line = finding.details["declaration"]
    assert finding.details["verified"] and "..." not in line and "slope" in line, line

    # the independent reference: the hand-written triangle of the code, on a grid, per width
    surrogate = eval(re.search(r"surrogate=(lambda .*)\)$", line).group(1),  # noqa: S307
                     {"torch": torch})
    m = torch.linspace(-3, 3, 25, dtype=torch.float64).repeat(2, 1).requires_grad_()
    slope = torch.tensor([[0.8], [-1.3]], dtype=torch.float64).expand(2, 25)
    (got,) = torch.autograd.grad(surrogate(m, slope).sum(), m)
    torch.testing.assert_close(got, (1 - m.detach().abs() / slope).clamp(min=0))

    assert _check(tmp_path, "pasted", _pasted(line, WIDTH.format(k="1"))).passed
    wrong = _check(tmp_path, "wrong", _pasted(line, WIDTH.format(k="2")))
    assert "surrogate-mismatch" in wrong.codes("error"), wrong

    # A threshold's gradient dropped: forward's surrogate, stated unchecked.
    fn = _load(tmp_path, "threshold", THRESHOLD.format(thr_grad="None"))
    m = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    thr = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)  # a learnable threshold
    finding = _finding(fn, m, thr, args[1])
    line = finding.details["declaration"]
    assert not finding.details["verified"] and "..." not in line, line
    assert "thr" in line.split("surrogate=")[1].split(":", 1)[1], line
    assert "backward must return that gradient" in finding.hint
    defect = _check(tmp_path, "defect", _pasted(line, THRESHOLD.format(thr_grad="None")))
    assert "surrogate-mismatch" in defect.codes("error"), defect
    learns = _check(tmp_path, "learns", _pasted(
        line, THRESHOLD.format(thr_grad="-d.sum_to_size(thr.shape)")))
    assert learns.passed, learns
