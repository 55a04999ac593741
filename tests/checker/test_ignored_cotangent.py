"""A rounding op whose backward does not depend on grad_output (``torch.ones(grad_output.shape)``)
FAILs with an ``undeclared-estimator`` whose message names that harm and whose declaration is
never called checked (round 13 task q, reduced from corpus 12b's rounding ops). Backwards that
ignore grad_output by design (an added loss: the ``intended=`` families) keep their codes, so
nothing but the text changes; a straight-through estimator passing grad_output is not named, and
a fused loss that forgets to scale its stored gradient still FAILs."""

from __future__ import annotations

import torch

import gradsmith


class CeilOnes(torch.autograd.Function):  # the defect: the incoming gradient is discarded
    @staticmethod
    def forward(ctx, x):
        return torch.ceil(x)

    @staticmethod
    def backward(ctx, g):
        return torch.ones(g.shape, dtype=g.dtype)


class CeilSTE(torch.autograd.Function):  # a straight-through estimator: g passed through
    @staticmethod
    def forward(ctx, x):
        return torch.ceil(x)

    @staticmethod
    def backward(ctx, g):
        return g


class StoredLoss(torch.autograd.Function):
    """Mean squared error computing its gradient in forward (a fused loss's pattern)."""

    @staticmethod
    def forward(ctx, x, y):
        diff = x - y
        ctx.save_for_backward(2 * diff / diff.numel())
        return (diff * diff).mean()

    @staticmethod
    def backward(ctx, g):
        (stored,) = ctx.saved_tensors
        return g * stored, None


class StoredLossUnscaled(StoredLoss):  # planted: "assume grad_output is always 1.0"
    @staticmethod
    def backward(ctx, g):
        (stored,) = ctx.saved_tensors
        return stored, None


def _args():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(3, 4, dtype=torch.float64, generator=gen).requires_grad_()
    return x, torch.randn(3, 4, dtype=torch.float64, generator=gen)


def _ignored(report) -> list:
    return [f for f in report.errors if f.details.get("ignores_grad_output")]


def test_a_backward_that_discards_grad_output_fails_naming_it():
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    report = gradsmith.check(CeilOnes, x, compat=False)
    assert not report.passed
    (found,) = _ignored(report)
    assert found.code == "undeclared-estimator" and "ignores grad_output" in found.message
    assert not found.details["verified"] and found.details["ignores_grad_output"] == ["x"]
    # Independent reference: the gradient of 4 * sum(ceil(x)) through it is not 4 times that
    # of sum(ceil(x)), as the chain rule requires of any backward.
    one = torch.autograd.grad(CeilOnes.apply(x).sum(), x)[0]
    four = torch.autograd.grad(4 * CeilOnes.apply(x).sum(), x)[0]
    assert not torch.allclose(four, 4 * one)


def test_a_straight_through_estimator_is_still_an_estimator():
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    report = gradsmith.check(CeilSTE, x, compat=False)
    assert "undeclared-estimator" in report.codes("error")
    assert not _ignored(report)


def test_a_fused_loss_that_scales_its_stored_gradient_passes():
    x, y = _args()
    report = gradsmith.check(StoredLoss, x, y, compat=False)
    assert report.passed, report.codes("error")
    xx = x.detach().clone().requires_grad_()
    want = torch.autograd.grad(3 * ((xx - y) ** 2).mean(), xx)[0]
    got = torch.autograd.grad(3 * StoredLoss.apply(xx, y), xx)[0]
    torch.testing.assert_close(got, want)


def test_the_planted_unscaled_stored_gradient_fails():
    x, y = _args()
    report = gradsmith.check(StoredLossUnscaled, x, y, compat=False)
    assert "gradient-mismatch" in report.codes("error")
