"""A Function given a callable whose backward returns too few gradients is a FAIL naming the
count, not a skip (corpus 11b dev: BIMRL's ``Sparse_grad_attention(inp, sa)`` calls the module
``sa`` in forward and returns one gradient for two inputs; synthesis wanted forward *and*
backward to run for a callable argument, autograd's count check failed on every invented
function, and the row was a skip that hid the defect). How many values backward returns does
not depend on the function invented. Reduced cases written here; the reference is autograd of
``2 * x``.
"""

from __future__ import annotations

import torch
from torch.autograd import Function

import gradsmith
from gradsmith.discovery.synthesize import Synthesized, synthesize


class Doubled(Function):
    """``2 * x``; ``score`` (a callable) only decides what forward saves."""

    @staticmethod
    def forward(ctx, x, score):
        ctx.save_for_backward(x, score(x))
        return 2 * x

    @staticmethod
    def backward(ctx, g):
        return 2 * g, None


class DoubledOneGradient(Doubled):
    """Planted: one gradient for two inputs (autograd raises on every call)."""

    @staticmethod
    def backward(ctx, g):
        return 2 * g


def test_the_right_count_passes_against_autograd():
    found = synthesize(Doubled)
    assert isinstance(found, Synthesized) and callable(found.args[1]), found
    x = found.args[0].detach().clone().requires_grad_(True)
    (got,) = torch.autograd.grad(Doubled.apply(x, found.args[1]).sum(), x)
    y = x.detach().clone().requires_grad_(True)
    (want,) = torch.autograd.grad((2 * y).sum(), y)
    torch.testing.assert_close(got, want)
    assert gradsmith.check(Doubled, *found.args, compat=False).passed


def test_one_gradient_for_two_inputs_fails_with_the_count():
    found = synthesize(DoubledOneGradient)
    assert isinstance(found, Synthesized), found  # before: NoInputs, a skip
    report = gradsmith.check(DoubledOneGradient, *found.args, compat=False)
    assert report.verdict == "FAILED" and "wrong-grad-count" in report.codes("error"), report
