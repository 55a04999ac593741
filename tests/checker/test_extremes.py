"""Backward at inputs of large magnitude: NaN where forward is finite (issue 18).

Matterhorn's ``_heaviside_sigmoid`` (reduced here, written anew): a spike with the sigmoid
surrogate computed as ``e / (1 + e)**2 / a``, ``e = exp(-x / a)``. On small inputs it equals
autograd of ``sigmoid(x / a)``, so the declaration gradsmith printed made it PASS; below
``x / a = -709`` (float64; -88 in float32) ``e`` overflows and the gradient is NaN. The same
surrogate in the stable form passes; so do smooth Functions, and forwards that overflow
themselves at that scale.
"""

from __future__ import annotations

import torch
from torch.autograd import Function

import gradsmith
from gradsmith.checker.extremes import SCALE


class SpikeNaive(Function):
    @staticmethod
    def forward(ctx, x, a):
        ctx.save_for_backward(x)
        ctx.a = a
        return (x >= 0).to(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        e = torch.exp(-x / ctx.a)
        return g * e / (1 + e) ** 2 / ctx.a, None


class SpikeStable(Function):
    @staticmethod
    def forward(ctx, x, a):
        ctx.save_for_backward(x)
        ctx.a = a
        return (x >= 0).to(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(x / ctx.a)
        return g * s * (1 - s) / ctx.a, None


class Softplus(Function):  # correct, and finite at any scale
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.nn.functional.softplus(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * torch.sigmoid(x)


class Exp(Function):  # forward itself overflows at that scale: nothing to say there
    @staticmethod
    def forward(ctx, x):
        y = torch.exp(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y


def _x() -> torch.Tensor:
    gen = torch.Generator().manual_seed(4)
    return torch.randn(3, 4, dtype=torch.float64, generator=gen).requires_grad_()


def _surrogate(x, a):
    return torch.sigmoid(x / a)


def test_the_naive_surrogate_fails_at_scale_although_its_declaration_holds():
    report = gradsmith.check(SpikeNaive, _x(), 0.25, surrogate=_surrogate)
    assert not report.passed and report.codes("error") == {"nan-gradient-at-scale"}, \
        report.summary()
    # the NaN is real: at one large negative input backward is NaN, the surrogate's is ~0
    x = torch.tensor([-300.0], dtype=torch.float64, requires_grad=True)
    (got,) = torch.autograd.grad(SpikeNaive.apply(x, 0.25), x, torch.ones(1, dtype=x.dtype))
    assert torch.isnan(got).all()


def test_the_stable_surrogate_passes_and_equals_the_declared_one_at_scale():
    report = gradsmith.check(SpikeStable, _x(), 0.25, surrogate=_surrogate)
    assert report.passed, report.summary()
    x = (_x() * SCALE).detach().requires_grad_()
    g = torch.randn(x.shape, dtype=x.dtype, generator=torch.Generator().manual_seed(5))
    (got,) = torch.autograd.grad(SpikeStable.apply(x, 0.25), x, g)
    y = x.detach().clone().requires_grad_()
    (want,) = torch.autograd.grad(torch.sigmoid(y / 0.25), y, g)
    torch.testing.assert_close(got, want)


def test_smooth_functions_and_overflowing_forwards_report_nothing():
    for fn in (Softplus, Exp):
        report = gradsmith.check(fn, _x())
        assert report.passed and "nan-gradient-at-scale" not in {
            f.code for f in report.findings}, report.summary()
