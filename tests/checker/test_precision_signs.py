"""float32 outputs that differ from float64 only in signs are a gauge, not lost digits.

A block-sparse SVD stores ``U`` flat, so the gauge alignment of the gradient checks sees no
matrix; in float32 LAPACK may pick the other sign of a singular vector, and the precision check
read that as a relative error of 1.4 (yastn's kernel_svd, a correct Function, FAILed with
``precision-loss``). Outputs equal in magnitude and differing in sign are no precision measure;
a formula that really loses digits still fails.
"""

from __future__ import annotations

from types import SimpleNamespace

import torch

import gradsmith
from gradsmith.checker.deploy.precision import _signs_only


def test_outputs_equal_up_to_signs_are_a_gauge_and_lost_digits_are_not():
    want = torch.tensor([0.6, -0.8, 0.28, 0.96], dtype=torch.float64)
    flipped = want * torch.tensor([-1.0, -1.0, 1.0, 1.0], dtype=torch.float64)
    got, ref = SimpleNamespace(outs=[flipped]), SimpleNamespace(outs=[want])
    assert _signs_only(None, got, ref, 2e-3)
    lossy = SimpleNamespace(outs=[want + torch.tensor([0.1, 0.0, 0.0, 0.0], dtype=torch.float64)])
    assert not _signs_only(None, lossy, ref, 2e-3)
    assert not _signs_only(None, ref, ref, 2e-3)  # nothing differs: nothing to excuse


class Cancelling(torch.autograd.Function):
    """(1 - cos x) / x**2 near 0: every digit lost in float32, correct gradient in float64."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return (1 - torch.cos(x)) / x**2

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (x * torch.sin(x) - 2 * (1 - torch.cos(x))) / x**3


def test_a_cancelling_formula_still_loses_its_digits():
    x = torch.full((4,), 1e-3, dtype=torch.float64) * torch.arange(1, 5, dtype=torch.float64)
    report = gradsmith.check(Cancelling, x, checks=["precision"], compat=True)
    assert "precision-loss" in report.codes("error")
