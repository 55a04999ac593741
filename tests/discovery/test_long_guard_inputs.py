"""A forward whose own guard raises unless an argument is an integer tensor ("Expected
torch.LongTensor but got torch.DoubleTensor", issue 18, corpus 8a held-out: a phase harmonic's
orders ``k``) gets an int64 tensor there, read from the guard's message. Reduced case written
here; a wrong backward on the same inputs still fails.
"""

from __future__ import annotations

import torch
from torch.autograd import Function

import gradsmith
from gradsmith.discovery.synthesize import Synthesized, synthesize


def _power(factor: float):
    def is_long(t):
        return isinstance(t, torch.Tensor) and t.dtype == torch.long

    class Harmonic(Function):
        """``z ** k`` elementwise for integer orders ``k``."""

        @staticmethod
        def forward(ctx, z, k):
            if not is_long(k):
                raise TypeError(f"Expected torch.LongTensor but got {k.type()}")
            kf = k.to(z.dtype)
            ctx.save_for_backward(z, kf)
            return z ** kf

        @staticmethod
        def backward(ctx, g):
            z, kf = ctx.saved_tensors
            return g * kf * z ** (kf - 1) * factor, None

    return Harmonic


def test_an_argument_a_guard_requires_to_be_long_gets_an_integer_tensor_and_passes():
    right = _power(1.0)
    found = synthesize(right)
    assert isinstance(found, Synthesized), found
    z, k = found.args
    assert k.dtype == torch.int64 and "LongTensor" in found.description
    # reference: autograd of the same power with the orders as constants
    (got,) = torch.autograd.grad(right.apply(z, k).sum(), z)
    w = z.detach().clone().requires_grad_()
    (want,) = torch.autograd.grad((w ** k.to(w.dtype)).sum(), w)
    torch.testing.assert_close(got, want)
    assert gradsmith.check(right, *found.args).passed


def test_a_wrong_backward_on_those_inputs_fails():
    wrong = _power(1.5)
    found = synthesize(wrong)
    assert isinstance(found, Synthesized), found
    report = gradsmith.check(wrong, *found.args)
    assert not report.passed
    assert "gradient-mismatch" in report.codes("error")
