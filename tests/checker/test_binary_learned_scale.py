"""A binary weight with a learned scale, as a 1-bit LSQ backward writes it (issue 18, corpus 9b
dev: PSA-Compress's ``ElasticQuantBinarizerSigned``, from BiT, at one bit): forward ``sign(w) *
alpha``, backward ``w``'s gradient passed inside ``[-alpha, alpha]`` and ``alpha``'s
``sign(w) * grad / sqrt(N)``. It printed a template. Now the line is checked, passes pasted as
printed, and its autograd is the hand-written rule (the independent reference); a backward
without the ``1 / sqrt(N)`` gradient scale FAILs under the same line.

Reduced case written here.
"""

from __future__ import annotations

import importlib.util
import re
import sys

import torch

import gradsmith
from gradsmith.discovery.synthesize import synthesize

SOURCE = """
import math

import torch
from torch.autograd import Function

import gradsmith


class Binarize(Function):
    @staticmethod
    def forward(ctx, w, alpha, num_bits):
        ctx.save_for_backward(w, alpha)
        ctx.scale = {scale}
        return w.sign() * alpha

    @staticmethod
    def backward(ctx, g):
        w, alpha = ctx.saved_tensors
        q = w / alpha
        middle = 1.0 - (q < -1).to(g.dtype) - (q > 1).to(g.dtype)
        grad_alpha = (w.sign() * g * ctx.scale).sum().reshape_as(alpha)
        return middle * g, grad_alpha, None
"""

SCALED = "1.0 / math.sqrt(w.numel())"


def _load(tmp_path, stem: str, text: str):
    path = tmp_path / f"{stem}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(f"binary_{stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.Binarize


def test_a_binary_weight_with_a_learned_scale_gets_a_checked_line(tmp_path):
    fn = _load(tmp_path, "plain", SOURCE.format(scale=SCALED))
    torch.manual_seed(0)
    report = gradsmith.check(fn, *synthesize(fn).args, compat=False)
    (finding,) = [f for f in report.errors if f.code == "undeclared-estimator"]
    line = finding.details["declaration"]
    assert finding.details["verified"] and "..." not in line, line

    # the independent reference: the rule written by hand, at other values than the check's
    surrogate = eval(re.search(r"surrogate=(lambda .*)\)$", line).group(1),  # noqa: S307
                     {"torch": torch})
    w = torch.linspace(-2, 2, 20, dtype=torch.float64).reshape(4, 5).requires_grad_()
    alpha = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    v = torch.randn(4, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    out = surrogate(w, alpha, 1)
    torch.testing.assert_close(out, w.detach().sign() * 0.7)
    got_w, got_alpha = torch.autograd.grad((out * v).sum(), [w, alpha])
    torch.testing.assert_close(got_w, v * (w.detach().abs() <= 0.7))
    torch.testing.assert_close(got_alpha, (w.detach().sign() * v).sum() / 20 ** 0.5)

    pasted = SOURCE.replace("class Binarize", line + "\nclass Binarize")
    torch.manual_seed(0)
    assert gradsmith.check(_load(tmp_path, "pasted", pasted.format(scale=SCALED)),
                           compat=False).passed
    torch.manual_seed(0)
    wrong = gradsmith.check(_load(tmp_path, "wrong", pasted.format(scale="1.0")),
                            compat=False)
    assert "surrogate-mismatch" in wrong.codes("error"), wrong
