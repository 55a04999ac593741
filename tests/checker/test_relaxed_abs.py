"""AdderNet's estimator is recognised (issue 18, corpus 13b held-out: wageubn's ``Adder``).

Forward ``-sum_j |W[i, j] - X[j, l]|``; backward the gradient with ``|d|`` relaxed: the
full-precision difference for ``W`` (rescaled to norm ``0.2 * sqrt(W.numel())``) and
``HardTanh`` for ``X``. It was a gradient-mismatch with nothing to declare; now it is an
undeclared-estimator naming the family, with an ``intended=`` template (only the user can
write the rescaling). The reference for the claim is autograd of the relaxed forward written
by hand. The completed declaration passes pasted; a wrong backward (a Huber of width 2) and
an ``abs`` whose backward forgot the sign (DeepShift's ``AbsFunction``) stay
gradient-mismatches.

Reduced cases written here.
"""

from __future__ import annotations

import importlib.util
import math
import sys

import torch

import gradsmith

SOURCE = """import math

import torch
from torch.autograd import Function
import gradsmith


class Adder(Function):
    @staticmethod
    def forward(ctx, W, X):
        ctx.save_for_backward(W, X)
        return -(W.unsqueeze(2) - X.unsqueeze(0)).abs().sum(1)

    @staticmethod
    def backward(ctx, g):
        W, X = ctx.saved_tensors
        gW = ((X.unsqueeze(0) - W.unsqueeze(2)) * g.unsqueeze(1)).sum(2)
        gW = gW / gW.norm(p=2).clamp(min=1e-12) * math.sqrt(W.numel()) / 5
        gX = (-(X.unsqueeze(0) - W.unsqueeze(2)).clamp(-{width}, {width}) * g.unsqueeze(1)).sum(0)
        return gW, gX
"""

INTENDED = (
    "@gradsmith.example(lambda: (torch.randn(4, 3, dtype=torch.float64), "
    "torch.randn(3, 5, dtype=torch.float64)), intended=lambda W, X, grad: ("
    "(h := ((X.unsqueeze(0) - W.unsqueeze(2)) * grad.unsqueeze(1)).sum(2)) / h.norm() "
    "* math.sqrt(W.numel()) / 5, "
    "((W.unsqueeze(2) - X.unsqueeze(0)).clamp(-1, 1) * grad.unsqueeze(1)).sum(0)))")

ABS = """import torch
from torch.autograd import Function


class Abs(Function):
    @staticmethod
    def forward(ctx, x):
        return x.abs()

    @staticmethod
    def backward(ctx, g):
        return g
"""


def _load(tmp_path, stem: str, text: str, name: str):
    path = tmp_path / f"{stem}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(f"relaxed_abs_{stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return getattr(module, name)


def _args():
    gen = torch.Generator().manual_seed(2)
    return [torch.randn(shape, dtype=torch.float64, generator=gen, requires_grad=True)
            for shape in ((4, 3), (3, 5))]


def test_addernet_is_an_estimator_with_a_template(tmp_path):
    fn = _load(tmp_path, "adder", SOURCE.format(width=1), "Adder")
    W, X = _args()
    torch.manual_seed(0)
    report = gradsmith.check(fn, W, X, compat=False)
    assert report.codes("error") == {"undeclared-estimator"}, report
    (finding,) = report.errors
    assert finding.details["estimator"] == {"W": "relaxed-abs", "X": "relaxed-abs"}
    assert not finding.details["verified"] and "intended=lambda W, X, grad: ..." in (
        finding.details["declaration"])

    # the independent reference: autograd of the forward with |d| relaxed, written by hand
    g = torch.randn(4, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(8))
    gW, gX = torch.autograd.grad(fn.apply(W, X), (W, X), g)
    d = W.unsqueeze(2) - X.unsqueeze(0)
    (hW,) = torch.autograd.grad(-(d * d / 2).sum(1), W, g, retain_graph=True)
    huber = torch.where(d.abs() <= 1, d * d / 2, d.abs() - 0.5)
    (hX,) = torch.autograd.grad(-huber.sum(1), X, g)
    torch.testing.assert_close(gW, hW / hW.norm() * math.sqrt(W.numel()) / 5)
    torch.testing.assert_close(gX, hX)


def test_the_completed_template_passes_and_wrong_backwards_stay_mismatches(tmp_path):
    pasted = SOURCE.format(width=1).replace("class", INTENDED + "\nclass", 1)
    torch.manual_seed(0)
    report = gradsmith.check(_load(tmp_path, "pasted", pasted, "Adder"), compat=False)
    assert report.passed, report
    # a planted wrong backward: HardTanh of width 2 is the gradient of no relaxation tried
    torch.manual_seed(0)
    report = gradsmith.check(_load(tmp_path, "wide", SOURCE.format(width=2), "Adder"),
                             *_args(), compat=False)
    assert "gradient-mismatch" in report.codes("error"), report
    # an abs whose backward forgot the sign: a wrong gradient, not a relaxed one
    x = torch.randn(3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(1),
                    requires_grad=True)
    torch.manual_seed(0)
    report = gradsmith.check(_load(tmp_path, "abs", ABS, "Abs"), x, compat=False)
    assert report.codes("error") == {"gradient-mismatch"}, report
