"""A rank read through a local copy of the shape: ``shape = x.shape; n = shape[4]`` (issue 18).

A spike-count loss (reduced here, written anew) reads its time steps as ``shape[4]`` after
``shape = outputs.shape``. Only ``x.shape[4]`` itself gave ``x`` five dimensions, so every
synthesised layout had too few and forward raised IndexError: a skip. Read through the local,
the rank is five, a correct backward passes and a wrong one fails.
"""

from __future__ import annotations

import torch
from torch.autograd import Function

import gradsmith
from gradsmith.discovery import Synthesized, synthesize


class MeanOverSteps(Function):
    @staticmethod
    def forward(ctx, spikes):
        shape = spikes.shape
        steps = shape[4]
        ctx.steps = steps
        return spikes.sum(dim=4) / steps

    @staticmethod
    def backward(ctx, g):
        return g.unsqueeze(-1).expand(*g.shape, ctx.steps) / ctx.steps


class MeanOverStepsWrong(Function):
    @staticmethod
    def forward(ctx, spikes):
        size = spikes.size()
        ctx.steps = size[4]
        return spikes.sum(dim=4) / ctx.steps

    @staticmethod
    def backward(ctx, g):
        return g.unsqueeze(-1).expand(*g.shape, ctx.steps).clone()  # planted: no 1/T


def test_a_shape_read_through_a_local_gives_the_rank_and_the_right_gradient_passes():
    found = synthesize(MeanOverSteps)
    assert isinstance(found, Synthesized), found
    (spikes,) = found.args
    assert spikes.dim() == 5, found.description
    report = gradsmith.check(MeanOverSteps, spikes)
    assert report.passed, report.summary()
    x = spikes.detach().clone().requires_grad_()
    g = torch.randn(x.shape[:4], dtype=x.dtype, generator=torch.Generator().manual_seed(3))
    (got,) = torch.autograd.grad(MeanOverSteps.apply(x), x, g)
    y = x.detach().clone().requires_grad_()
    (want,) = torch.autograd.grad(y.mean(dim=4), y, g)  # autograd of the same expression
    torch.testing.assert_close(got, want)


def test_a_planted_missing_scale_fails():
    found = synthesize(MeanOverStepsWrong)
    assert isinstance(found, Synthesized), found
    assert found.args[0].dim() == 5, found.description
    report = gradsmith.check(MeanOverStepsWrong, *found.args)
    assert not report.passed and report.codes("error"), report.summary()
