"""Two more surrogate-gradient families are recognised and given a declaration that, pasted as
printed, passes: spikingjelly's nonzero-sign-log-abs (backward ``grad / (1 / alpha + |x|)``, the
derivative of ``sign(x) log(1 + alpha |x|)``) and a square wave's first Fourier term (backward
``4 / T cos(2 pi x / T) grad``, the derivative of ``2 / pi sin(2 pi x / T)``). Both printed a
template that could not pass (corpus 7b dev, issue 18)."""

from __future__ import annotations

import math
import re

import pytest
import torch

import gradsmith


def _spike(x):
    return (x >= 0).to(x)


class LogAbsSpike(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, alpha):
        ctx.save_for_backward(x)
        ctx.alpha = alpha
        return _spike(x)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output / (1 / ctx.alpha + ctx.saved_tensors[0].abs()), None


class CosineSpike(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, n, T_period):  # noqa: N803 - the family's own name
        ctx.save_for_backward(x)
        ctx.n, ctx.T_period = n, T_period
        return _spike(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        w = 2 * math.pi / ctx.T_period
        grad_x = sum(torch.cos((2 * i - 1) * w * x) for i in range(1, ctx.n))
        return grad_x * 4 / ctx.T_period * grad_output, None, None


class CosineSpikeWrongSign(CosineSpike):
    @staticmethod
    def backward(ctx, grad_output):
        (g, *_) = CosineSpike.backward(ctx, grad_output)
        return -g, None, None


def _x():
    return torch.randn(3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(3))


# (Function, arguments, the primitive whose autograd gradient backward computes)
CASES = [
    (LogAbsSpike, (2.0,), lambda x: torch.sign(x) * torch.log1p(2.0 * x.abs())),
    (CosineSpike, (2, 8.0), lambda x: 2 / math.pi * torch.sin(2 * math.pi / 8.0 * x)),
]


@pytest.mark.parametrize(("fn", "rest", "primitive"), CASES, ids=["log-abs", "cosine"])
def test_printed_declaration_passes_as_printed(fn, rest, primitive):
    x = _x()
    # Independent reference: backward equals autograd of the family's primitive.
    leaf = x.clone().requires_grad_(True)
    (want,) = torch.autograd.grad(primitive(leaf).sum(), leaf)
    leaf = x.clone().requires_grad_(True)
    (got,) = torch.autograd.grad(fn.apply(leaf, *rest).sum(), leaf)
    torch.testing.assert_close(got, want)

    report = gradsmith.check(fn, x, *rest)
    assert report.codes("error") == {"undeclared-estimator"}, str(report)
    (f,) = report.errors
    assert f.details["verified"], f.details["declaration"]
    factory, key, source = re.search(r"example\((lambda: .*), (surrogate)=(lambda .*)\)$",
                                     f.details["declaration"]).groups()
    assert "..." not in source
    args = eval(factory, {"torch": torch})()  # noqa: S307 - gradsmith's own line, as printed
    declared = eval(source, {"torch": torch})  # noqa: S307
    assert gradsmith.check(fn, *args, **{key: declared}).passed


def test_a_wrong_backward_fails_against_the_right_declaration():
    x = _x()
    right = lambda x, n, T_period: 2 / math.pi * torch.sin(2 * math.pi / T_period * x)  # noqa: E731
    assert gradsmith.check(CosineSpike, x, 2, 8.0, surrogate=right).passed
    report = gradsmith.check(CosineSpikeWrongSign, x, 2, 8.0, surrogate=right)
    assert not report.passed and report.codes("error"), str(report)
