"""An optional hook the code tests for None is tried as None first (corpus 7a dev MIRTorch
``CG_func``: its ``eval_func``, tested ``if eval_func is not None`` in the solver helper both
directions call, was invented as a function, forward then returned ``(x, saved)`` and the
one-output backward raised on every layout: a skip).

A caller passes None by default; an invented hook changes what forward returns. Reduced case
written here; the reference is autograd of ``b / a``.
"""

from __future__ import annotations

import torch
from torch.autograd import Function

import gradsmith
from gradsmith.discovery.synthesize import Synthesized, synthesize


def _divide(b, a, hook):
    x = b / a
    if hook is not None:
        return x, hook(x)  # a trace of the solve, for whoever asked for one
    return x


class Divide(Function):
    @staticmethod
    def forward(ctx, b, a, hook):
        ctx.a, ctx.hook = a, hook
        return _divide(b, a, hook)

    @staticmethod
    def backward(ctx, g):
        return _divide(g, ctx.a, ctx.hook), None, None


class DivideDoubled(Divide):
    @staticmethod
    def backward(ctx, g):
        return 2 * _divide(g, ctx.a, ctx.hook), None, None


def test_the_hook_is_none_and_the_check_passes():
    found = synthesize(Divide)
    assert isinstance(found, Synthesized) and not found.doubt, found
    b, a, hook = found.args
    assert hook is None and "hook=None" in found.description
    bl = b.detach().clone().requires_grad_(True)
    g = torch.randn(bl.shape, dtype=bl.dtype)
    (got,) = torch.autograd.grad(Divide.apply(bl, a, None), bl, g)
    br = b.detach().clone().requires_grad_(True)
    (want,) = torch.autograd.grad(br / a, br, g)
    torch.testing.assert_close(got, want)
    report = gradsmith.check(Divide, *found.args, compat=False)
    assert report.passed, report


def test_a_planted_wrong_backward_still_fails():
    found = synthesize(DivideDoubled)
    assert isinstance(found, Synthesized), found
    report = gradsmith.check(DivideDoubled, *found.args, compat=False)
    assert "gradient-mismatch" in report.codes("error"), report
