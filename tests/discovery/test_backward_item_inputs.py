"""A tensor backward reads one number from (``(2 ** k - 1).item()``) is a one-element tensor
(issue 18, corpus 14b dev: DoReFa-Net's stochastic gradient quantizer).

Forward only saves ``k``; backward reads the number of levels from it. Synthesised with the
input's (3, 4) shape, every candidate raised in backward ("a Tensor with 12 elements cannot be
converted to Scalar"): a backward-error on inputs the code is not written for. Read from
backward, ``k`` is a 0-dim tensor, backward runs, and the row is what the code is: a random
gradient estimator whose ``unbiased=True`` line passes as printed. The structure check's
backward calls (all inputs trainable, then each frozen) draw the same random numbers, so a
random backward is no needs-input-grad-mismatch. The reference is the closed form: stochastic
rounding is unbiased, so the mean of many draws is the incoming gradient. A planted wrong
backward (twice the quantized gradient) still FAILs under the pasted line.

Reduced cases written here.
"""

from __future__ import annotations

import torch
from torch.autograd import Function

import gradsmith
from gradsmith.discovery import Synthesized, synthesize


def _quantized(g, n, factor=1.0):
    top = g.abs().max()
    y = g / (2 * top) + 0.5 + g.new_zeros(g.size()).uniform_(-0.5 / n, 0.5 / n)
    y = torch.round(y.clamp(0, 1) * n) / n - 0.5
    return factor * 2 * top * y


class GradQuant(Function):
    @staticmethod
    def forward(ctx, x, k):
        ctx.save_for_backward(k)
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        (k,) = ctx.saved_tensors
        n = (2 ** k - 1).item()
        return _quantized(g, n), None


class GradQuantTwice(GradQuant):
    @staticmethod
    def backward(ctx, g):
        (k,) = ctx.saved_tensors
        n = (2 ** k - 1).item()
        return _quantized(g, n, factor=2.0), None  # planted: twice the gradient


def test_the_bit_width_is_one_value_and_backward_runs():
    found = synthesize(GradQuant)
    assert isinstance(found, Synthesized), found
    x, k = found.args
    assert isinstance(k, torch.Tensor) and k.numel() == 1, found.description
    report = gradsmith.check(GradQuant, *found.args)
    codes = report.codes("error")
    assert set(codes) == {"undeclared-estimator"}, str(report)
    (finding,) = report.errors
    assert finding.details["verified"] and "unbiased=True" in finding.details["declaration"]


def test_the_pasted_line_passes_and_a_wrong_backward_fails():
    x = torch.randn(3, 4, dtype=torch.float64)
    k = torch.tensor(2.0, dtype=torch.float64)
    # the closed form: stochastic rounding's mean is the incoming gradient
    g = torch.randn(3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    torch.manual_seed(0)
    mean = torch.stack([_quantized(g, 3.0) for _ in range(4000)]).mean(0)
    torch.testing.assert_close(mean, g, atol=0.05 * float(g.abs().max()), rtol=0)
    assert gradsmith.check(GradQuant, x, k, unbiased=True).passed
    wrong = gradsmith.check(GradQuantTwice, x, k, unbiased=True)
    assert not wrong.passed and wrong.codes("error"), str(wrong)


def test_a_reduction_read_as_a_number_keeps_its_tensor():
    from gradsmith.discovery.backward_items import read_backward_items
    from gradsmith.discovery.hints import Hint

    class Normalised(Function):
        @staticmethod
        def forward(ctx, x, w):
            ctx.save_for_backward(w)
            return x * w

        @staticmethod
        def backward(ctx, g):
            (w,) = ctx.saved_tensors
            return g * w / float(w.abs().sum()), None

    hints = {"x": Hint(), "w": Hint()}
    read_backward_items(Normalised, hints)
    assert not hints["w"].item
