"""A rounding quantizer whose backward is the derivative of a smooth staircase gets a checked
surrogate (issue 18, corpus 14b dev: the low-bitwidth project's
``ActRoundDifferentiableFunction``).

Forward ``round(x n) / n``; backward ``g * (1 - cos(2 pi n x) / beta)``, the derivative of
``x - sin(2 pi n x) / (2 pi n beta)``. The periodic family fitted a pure cosine only, so the
line was a template to complete. The cosine is now fitted to what backward adds to the
straight-through 1, its slope and amplitude read from the forward's numbers. The reference is
autograd of the staircase written by hand, at other values of ``n`` and ``beta`` than the
check's; a planted wrong backward (the cosine's period halved) FAILs under the pasted line.

Reduced cases written here.
"""

from __future__ import annotations

import math
import re

import torch
from torch.autograd import Function

import gradsmith


class SmoothRound(Function):
    @staticmethod
    def forward(ctx, x, n, beta):
        ctx.save_for_backward(x)
        ctx.n, ctx.beta = n, beta
        return torch.round(x * n) / n

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (1 - torch.cos(2 * math.pi * ctx.n * x) / ctx.beta), None, None


class SmoothRoundHalfPeriod(SmoothRound):
    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (1 - torch.cos(4 * math.pi * ctx.n * x) / ctx.beta), None, None  # planted


def _x():
    return torch.randn(3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(8))


def test_the_printed_staircase_is_checked_and_reads_n_and_beta():
    report = gradsmith.check(SmoothRound, _x(), 2, 1.5, compat=False)
    (finding,) = [f for f in report.errors if f.code == "undeclared-estimator"]
    line = finding.details["declaration"]
    assert finding.details["verified"] and "..." not in line, line
    surrogate = eval(re.search(r"surrogate=(lambda .*)\)$", line).group(1),  # noqa: S307
                     {"torch": torch})
    # the reference: autograd of the hand-written staircase at n = 3, beta = 0.7
    x = _x().requires_grad_(True)
    (got,) = torch.autograd.grad(surrogate(x, 3, 0.7).sum(), x)
    y = _x().requires_grad_(True)
    staircase = y - torch.sin(2 * math.pi * 3 * y) / (2 * math.pi * 3 * 0.7)
    (want,) = torch.autograd.grad(staircase.sum(), y)
    torch.testing.assert_close(got, want)
    pasted = gradsmith.check(SmoothRound, _x(), 3, 0.7, compat=False, surrogate=surrogate)
    assert pasted.passed, str(pasted)
    wrong = gradsmith.check(SmoothRoundHalfPeriod, _x(), 3, 0.7, compat=False,
                            surrogate=surrogate)
    assert "surrogate-mismatch" in wrong.codes("error"), str(wrong)
