"""A linear layer with a binarised weight and a straight-through weight gradient
(``x @ sign(W).T + b``; backward ``g @ sign(W)``, ``g.T @ x``, ``g.sum(0)``) gets a surrogate
declaration that passes as printed (issue 18, corpus 7b held-out: AdaSTE's
BinaryLinearFunction got a template that fails when applied). Reduced case written here; a
planted wrong weight gradient still FAILs under the printed declaration."""

from __future__ import annotations

import re

import torch
from torch.autograd import Function

import gradsmith


def _sign(t):
    return torch.where(t >= 0, torch.ones_like(t), -torch.ones_like(t))


class BinarisedLinear(Function):
    @staticmethod
    def forward(ctx, input, weight, bias=None):
        ctx.save_for_backward(input, weight, bias)
        out = input.mm(_sign(weight).t())
        return out if bias is None else out + bias

    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        grad_bias = None if bias is None else grad_output.sum(0)
        return grad_output.mm(_sign(weight)), grad_output.t().mm(input), grad_bias


class BinarisedLinearWrong(BinarisedLinear):
    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        grad_bias = None if bias is None else grad_output.sum(0)
        # the weight's gradient through sign(input): not the straight-through one
        return grad_output.mm(_sign(weight)), grad_output.t().mm(_sign(input)), grad_bias


def _args():
    gen = torch.Generator().manual_seed(0)
    return (torch.randn(3, 4, dtype=torch.float64, generator=gen),
            torch.randn(5, 4, dtype=torch.float64, generator=gen),
            torch.randn(5, dtype=torch.float64, generator=gen))


def test_printed_declaration_passes_as_printed_and_a_wrong_weight_gradient_fails():
    report = gradsmith.check(BinarisedLinear, *_args())
    assert report.codes("error") == {"undeclared-estimator"}, str(report)
    (f,) = report.errors
    assert f.details["verified"], f.details["declaration"]
    factory, source = re.search(r"example\((lambda: .*), surrogate=(lambda .*)\)$",
                                f.details["declaration"]).groups()
    args = eval(factory, {"torch": torch})()  # noqa: S307 - gradsmith's own line, as printed
    declared = eval(source, {"torch": torch})  # noqa: S307
    assert gradsmith.check(BinarisedLinear, *args, surrogate=declared).passed
    wrong = gradsmith.check(BinarisedLinearWrong, *args, surrogate=declared)
    assert not wrong.passed and wrong.codes("error"), str(wrong)


def test_the_declared_gradient_is_the_straight_through_one():
    """Independent reference: the hand-derived gradients of x @ sign(W).T + b with sign's
    derivative taken as 1, against what the printed surrogate's autograd gives."""
    x, w, b = (a.clone().requires_grad_() for a in _args())
    report = gradsmith.check(BinarisedLinear, *(a.detach() for a in (x, w, b)))
    (f,) = report.errors
    source = re.search(r"surrogate=(lambda .*)\)$", f.details["declaration"]).group(1)
    declared = eval(source, {"torch": torch})  # noqa: S307
    g = torch.randn(3, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    got = torch.autograd.grad(declared(x, w, b), (x, w, b), g)
    want = (g @ _sign(w.detach()), g.t() @ x.detach(), g.sum(0))
    for a, e in zip(got, want):
        torch.testing.assert_close(a, e)
