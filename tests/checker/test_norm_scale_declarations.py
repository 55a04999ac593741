"""A backward that scales the gradient by a function of the input's squared norm gets an
``intended=`` line that passes as pasted (issue 18, corpus 5 held-out: a Riemannian gradient on
the Poincare ball, ``grad * (1 - c |x|^2)^2 / 4``, printed only a template). Reduced case
written here; the reference is the formula by hand; a planted wrong factor still FAILs."""

from __future__ import annotations

import importlib.util
import re
import sys

import pytest
import torch

import gradsmith

BALL = """\
import torch

import gradsmith

{line}
class BallScaled(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * (1 - 0.5 * x.pow(2){rows}).pow(2) / {q}
"""


def _load(tmp_path, stem: str, text: str):
    path = tmp_path / f"{stem}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(f"norm_scale_{stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.BallScaled


@pytest.mark.parametrize("rows", [".sum(-1, keepdim=True)", ""], ids=["row-norm", "element"])
def test_a_squared_norm_scale_is_declared_and_passes_as_pasted(tmp_path, rows):
    fn = _load(tmp_path, "plain", BALL.format(line="", rows=rows, q=4))
    x = 0.4 * torch.randn(3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    report = gradsmith.check(fn, x.requires_grad_(), compat=False)
    (finding,) = [f for f in report.errors if f.code == "undeclared-estimator"]
    line = finding.details["declaration"]
    assert finding.details["verified"], line
    # the independent reference: the declared gradient is (1 - |x|^2 / 2)^2 / 4 times grad
    intended = eval(re.search(r"intended=(lambda .*)\)$", line).group(1),  # noqa: S307
                    {"torch": torch})
    g = torch.randn(3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    y = torch.randn(3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    s = y.pow(2).sum(-1, keepdim=True) if rows else y.pow(2)
    torch.testing.assert_close(intended(y, g), g * (1 - 0.5 * s).pow(2) / 4)
    pasted = _load(tmp_path, "pasted", BALL.format(line=line, rows=rows, q=4))
    assert gradsmith.check(pasted, compat=False).passed
    mutant = _load(tmp_path, "mutant", BALL.format(line=line, rows=rows, q=2))
    wrong = gradsmith.check(mutant, compat=False)
    assert "intended-mismatch" in wrong.codes("error"), str(wrong)
