"""A window's edges read from a short tensor argument are printed as its elements (issue 18,
corpus 5b dev BiBERT's quantizers, spent; their copies in corpus 10b's bnn_vi): forward clips
to ``clip_val[0]``/``clip_val[1]`` given as one 1-dim tensor, backward zeroes the gradient
outside. The line read ``x.clamp(-2.6725649, -0.0313325994)``: right at the printed example's
range only. Now ``x.clamp(clip_val[0], clip_val[1])``, which holds for any range. Checked
against the hand-written window at another range, pasted there it passes, and a planted
wrong backward FAILs under it. Reduced case written here.
"""

from __future__ import annotations

import importlib.util
import re
import sys

import torch

import gradsmith

SOURCE = """import torch
import gradsmith


class ClipQuant(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, clip_val, bits):
        ctx.save_for_backward(x, clip_val)
        y = torch.where(x < clip_val[1], x, clip_val[1])
        y = torch.where(y > clip_val[0], y, clip_val[0])
        s = (2 ** bits - 1) / (clip_val[1] - clip_val[0])
        return torch.round((y - clip_val[0]) * s) / s + clip_val[0]

    @staticmethod
    def backward(ctx, g):
        x, clip_val = ctx.saved_tensors
        gi = {scale} * g.clone()
        gi[x.ge(clip_val[1])] = 0
        gi[x.le(clip_val[0])] = 0
        return gi, None, None
"""


def _load(tmp_path, stem: str, text: str):
    path = tmp_path / f"{stem}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(f"clip_range_{stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_window_edges_are_the_range_argument_elements(tmp_path):
    fn = _load(tmp_path, "fit", SOURCE.format(scale="1")).ClipQuant
    x = torch.randn(3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(2),
                    requires_grad=True)
    clip = torch.tensor([-0.7, 1.3], dtype=torch.float64)
    torch.manual_seed(0)
    report = gradsmith.check(fn, x, clip, 4, compat=False)
    (finding,) = [f for f in report.errors if f.code == "undeclared-estimator"]
    line = finding.details["declaration"]
    assert finding.details["verified"] and "clamp(clip_val[0], clip_val[1])" in line, line

    # independent reference: at another range the surrogate's derivative is the window's
    surrogate = eval(re.search(r"surrogate=(lambda .*)\)$", line).group(1),  # noqa: S307
                     {"torch": torch})
    u = torch.linspace(-3, 3, 24, dtype=torch.float64, requires_grad=True)  # off the edges
    other = torch.tensor([-2.0, 0.5], dtype=torch.float64)
    (got,) = torch.autograd.grad(surrogate(u, other, 4).sum(), u)
    torch.testing.assert_close(got, ((u > -2.0) & (u < 0.5)).to(torch.float64))

    moved = line.replace("torch.tensor([-0.7, 1.3]", "torch.tensor([-2.0, 0.5]")
    assert moved != line, line
    for scale, ok in (("1", True), ("1.5", False)):
        text = SOURCE.format(scale=scale).replace("class", moved + "\nclass", 1)
        torch.manual_seed(0)
        report = gradsmith.check(_load(tmp_path, f"pasted_{ok}", text).ClipQuant, compat=False)
        assert report.passed == ok, (moved, report)
        if not ok:
            assert "surrogate-mismatch" in report.codes("error"), report
