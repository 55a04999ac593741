"""An attribute read only behind ``hasattr`` (``x.tensor() if hasattr(x, "tensor") else x``,
in forward or a helper it hands x to) does not make x an object: a plain tensor is synthesised,
where a namespace whose ``tensor`` took an argument failed every layout (a skip)."""

from __future__ import annotations

import torch

import gradsmith
from gradsmith.discovery.synthesize import Synthesized, synthesize


def _plain(x):
    return x.tensor() if hasattr(x, "tensor") else x


class Cube(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        t = x.tensor() if hasattr(x, "tensor") else x
        ctx.save_for_backward(t)
        return t ** 3

    @staticmethod
    def backward(ctx, g):
        (t,) = ctx.saved_tensors
        return 3 * t * t * g


class CubeByHelper(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        t = _plain(x)
        ctx.save_for_backward(t)
        return t ** 3

    @staticmethod
    def backward(ctx, g):
        (t,) = ctx.saved_tensors
        return 3 * t * t * g


class CubeWrong(torch.autograd.Function):  # planted: the factor 3 dropped
    @staticmethod
    def forward(ctx, x):
        t = x.tensor() if hasattr(x, "tensor") else x
        ctx.save_for_backward(t)
        return t ** 3

    @staticmethod
    def backward(ctx, g):
        (t,) = ctx.saved_tensors
        return t * t * g


def _found(fn) -> Synthesized:
    found = synthesize(fn)
    assert isinstance(found, Synthesized), found
    return found


def test_a_hasattr_guarded_attribute_leaves_a_plain_tensor_that_passes():
    for fn in (Cube, CubeByHelper):
        (x,) = _found(fn).args
        assert isinstance(x, torch.Tensor) and x.requires_grad, fn.__name__
        assert gradsmith.check(fn, x, compat=False).passed, fn.__name__
        # Independent reference: autograd of x ** 3.
        xx = x.detach().clone().requires_grad_()
        (want,) = torch.autograd.grad((xx ** 3).sum(), xx)
        (got,) = torch.autograd.grad(fn.apply(x).sum(), x)
        torch.testing.assert_close(got, want)


def test_the_planted_wrong_backward_fails():
    (x,) = _found(CubeWrong).args
    assert "gradient-mismatch" in gradsmith.check(CubeWrong, x, compat=False).codes("error")
