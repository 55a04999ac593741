"""A yes/no switch whose name mentions an inverse (``grad_is_inverse=False``: "compute the
gradient by inverting") is a flag, not an inverse function to match (issue 18, corpus 14b:
reversible2's ``WrapInvertibleFunction`` family was skipped as "'grad_is_inverse' must be
the inverse of another argument"). Reduced case written here: an invertible scaling whose
backward either inverts the output gradient or recomputes it, by a flag; its correct
backward, a planted wrong one, and an inverse *function* argument still never invented."""

from __future__ import annotations

import torch
from torch.autograd import Function

import gradsmith
from gradsmith.discovery import NoInputs, Synthesized, synthesize


class FlaggedScale(Function):
    @staticmethod
    def forward(ctx, x, keep_input, grad_is_inverse):
        ctx.grad_is_inverse = grad_is_inverse
        ctx.save_for_backward(x)
        return 3.0 * x + x ** 3 if not grad_is_inverse else 3.0 * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        if ctx.grad_is_inverse:
            return g * 3.0, None, None
        return g * (3.0 + 3 * x ** 2), None, None


class FlaggedScaleWrong(FlaggedScale):
    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3.0, None, None  # the cubic term's gradient dropped on both branches


def test_a_flag_named_after_an_inverse_is_synthesised_as_a_flag():
    found = synthesize(FlaggedScale)
    assert isinstance(found, Synthesized), found
    x, keep, flag = found.args[:3]
    assert isinstance(flag, bool) and isinstance(keep, bool)
    # Independent reference: autograd of the same expression without the Function
    leaf = x.detach().clone().requires_grad_(True)
    expr = 3.0 * leaf if flag else 3.0 * leaf + leaf ** 3
    (want,) = torch.autograd.grad(expr.sum(), leaf)
    leaf = x.detach().clone().requires_grad_(True)
    (got,) = torch.autograd.grad(FlaggedScale.apply(leaf, keep, flag).sum(), leaf)
    torch.testing.assert_close(got, want)


def test_correct_passes_and_the_planted_wrong_backward_fails():
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    assert gradsmith.check(FlaggedScale, x, False, False).passed
    wrong = gradsmith.check(FlaggedScaleWrong, x, False, False)
    assert "gradient-mismatch" in wrong.codes("error"), str(wrong)
    found = synthesize(FlaggedScaleWrong)
    assert isinstance(found, Synthesized), found
    assert not gradsmith.check(FlaggedScaleWrong, *found.args).passed


def test_an_inverse_function_argument_is_still_never_invented():
    class Invertible(Function):
        @staticmethod
        def forward(ctx, fn, fn_inverse, x):
            return fn(x)

        @staticmethod
        def backward(ctx, g):
            return None, None, g

    found = synthesize(Invertible)
    assert isinstance(found, NoInputs) and "'fn_inverse' must be the inverse" in found.reason
