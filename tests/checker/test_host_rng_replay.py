"""A forward drawing its noise from NumPy or Python's ``random`` is replayed like one drawing
from torch: a correct dropout with a NumPy mask passes the eager checks (it was a gradient
mismatch, nondeterministic backward and non-contiguous mismatch: every evaluation drew another
mask), a wrong one is still caught, and checkpointing, which does not replay NumPy, is still
reported. Compiled and exported runs draw from other streams, so they are not compared."""

from __future__ import annotations

import random

import numpy as np
import torch
from torch.autograd import Function

import gradsmith


def _numpy_mask(x):
    return torch.from_numpy((np.random.rand(*x.shape) > 0.5).astype("float64")).to(x.dtype)


class NumpyDropout(Function):
    @staticmethod
    def forward(ctx, x):
        mask = _numpy_mask(x)
        ctx.save_for_backward(mask)
        return x * mask * 2

    @staticmethod
    def backward(ctx, grad):
        (mask,) = ctx.saved_tensors
        return grad * mask * 2


class NumpyDropoutHalfGrad(NumpyDropout):
    @staticmethod
    def backward(ctx, grad):
        (mask,) = ctx.saved_tensors
        return grad * mask  # the 1/(1-p) scale is missing


class RandomScale(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.scale = random.uniform(0.5, 1.5)
        return x * ctx.scale

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.scale


def _x():
    return torch.randn(3, 4, dtype=torch.float64, requires_grad=True)


def _errors(report):
    return {f.code for f in report.findings if f.severity == "error"}


def test_correct_numpy_dropout_passes_the_eager_checks():
    report = gradsmith.check(NumpyDropout, _x(), compat=False)
    assert report.passed, report
    # The mask really is random: two calls (as autograd would make them) differ.
    x = _x()
    assert not torch.equal(NumpyDropout.apply(x), NumpyDropout.apply(x))


def test_python_random_scale_passes():
    assert gradsmith.check(RandomScale, _x(), compat=False).passed


def test_wrong_numpy_dropout_is_caught_with_the_true_factor():
    x = _x()
    report = gradsmith.check(NumpyDropoutHalfGrad, x, compat=False)
    assert _errors(report) == {"gradient-mismatch"}, report
    # Independent reference: with the same mask (same NumPy seed), plain autograd of the
    # forward's formula gives twice this backward's result.
    np.random.seed(5)
    mask = _numpy_mask(x)
    (true,) = torch.autograd.grad((x * mask * 2).sum(), x)
    np.random.seed(5)
    (analytic,) = torch.autograd.grad(NumpyDropoutHalfGrad.apply(x).sum(), x)
    assert mask.any() and not torch.allclose(analytic, true)
    torch.testing.assert_close(2 * analytic, true)


def test_checkpoint_is_still_reported_and_compile_export_not_compared():
    report = gradsmith.check(NumpyDropout, _x(), compat=True)
    codes = {f.code for f in report.findings}
    assert "checkpoint-mismatch" in codes  # the recomputed forward draws another mask
    assert "deploy-not-comparable" in codes
    assert not codes & {"compile-mismatch", "export-mismatch", "gradient-mismatch"}
    # Independent evidence that checkpointing really breaks it: torch's own checkpoint.
    from torch.utils.checkpoint import checkpoint

    x = _x()
    np.random.seed(0)
    (plain,) = torch.autograd.grad(NumpyDropout.apply(x).sum(), x)
    np.random.seed(0)
    out = checkpoint(NumpyDropout.apply, x, use_reentrant=False)
    (ckpt,) = torch.autograd.grad(out.sum(), x)
    assert not torch.equal(plain, ckpt)
