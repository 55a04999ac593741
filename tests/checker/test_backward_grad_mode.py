"""The structure check runs backward as autograd's engine does in training, with gradient
recording off: a backward that calls ``.numpy()`` on a saved tensor, or a torch function with
``out=``, is right in training and raises only when differentiated twice. Such a Function
PASSes first order with one second-order warning (corpus 7's held-out nitorch ``_LogM`` and
``_LSE`` were false first-order ``backward-error`` FAILs). The reference is torch's own
backward and gradgradcheck."""

from __future__ import annotations

import pytest
import torch
from torch.autograd import Function

import gradsmith


class NumpyCube(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * torch.from_numpy(3 * x.numpy() ** 2)


class SumOut(Function):
    """softmax-style: backward reduces into a preallocated buffer with ``out=``."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x.sum(-1, keepdim=True)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        total = torch.empty(x.shape[:-1] + (1,), dtype=x.dtype)
        torch.sum(x, dim=-1, keepdim=True, out=total)
        return g * total + (g * x).sum(-1, keepdim=True)


@pytest.mark.parametrize("fn", [NumpyCube, SumOut], ids=lambda f: f.__name__)
def test_backward_that_only_fails_when_differentiated_twice_passes_first_order(fn):
    torch.manual_seed(0)
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(fn.apply, (x,))  # training's backward is right
    with pytest.raises(RuntimeError):  # ... and differentiating it raises
        torch.autograd.gradgradcheck(fn.apply, (x,))
    report = gradsmith.check(fn, x)
    assert report.passed, str(report)
    assert "backward-error" not in report.codes()
    (f,) = [f for f in report.findings if f.code == "double-backward-error"]
    assert f.severity == "warning"
