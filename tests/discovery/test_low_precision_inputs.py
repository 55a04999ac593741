"""A Function written for bfloat16 makes bfloat16 tensors of its own (an FP8-style matmul with
``out_dtype=torch.bfloat16``); handed float64 inputs its backward meets them in a matmul and
raises "BFloat16 != double" (corpus 12d held-out: lingua's ``Fp8LinearFn``, judged a
straight-through estimator). Synthesis then uses bfloat16 inputs and says why, and the
estimator signature is read at a float64 step (forward runs there): undeclared-estimator,
not a backward-error or a coarse-step gradient-mismatch. The reference is autograd of the
surrogate the code means, ``x @ w.t()``; a planted wrong backward fails with it declared.
Reduced case written here.
"""

from __future__ import annotations

import torch
from torch.autograd import Function

import gradsmith
from gradsmith.discovery.low_precision import mixed_low_dtype
from gradsmith.discovery.synthesize import synthesize


def _coarse(t):
    """Round to 2 mantissa bits in bfloat16: an FP8-like grid (e5m2)."""
    t = t.to(torch.bfloat16)
    m, e = torch.frexp(t.float())
    return torch.ldexp((m * 8).round() / 8, e).to(torch.bfloat16)


class CoarseLinear(Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return _coarse(x) @ _coarse(w).t()

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g @ w, g.t() @ x  # straight through the rounding


class CoarseLinearDoubled(CoarseLinear):
    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return 2 * (g @ w), g.t() @ x


def _linear(x, w):
    return x @ w.t()


def test_the_mix_names_the_dtype():
    assert mixed_low_dtype("expected m1 and m2 to have the same dtype, but got: "
                           "c10::BFloat16 != double") == "bfloat16"
    assert mixed_low_dtype("expected m1 and m2 to have the same dtype, but got: "
                           "double != c10::Half") == "float16"
    assert mixed_low_dtype("expected scalar type Float but found Double") is None


def test_bfloat16_inputs_are_synthesised_and_said():
    found = synthesize(CoarseLinear)
    assert all(a.dtype == torch.bfloat16 for a in found.args), found.description
    assert "casts to bfloat16 itself" in found.description, found.description
    x, w = found.args
    gx, gw = torch.autograd.grad(CoarseLinear.apply(x, w).sum(), (x, w))
    x2, w2 = (t.detach().clone().requires_grad_(True) for t in (x, w))
    rx, rw = torch.autograd.grad(_linear(x2, w2).sum(), (x2, w2))
    torch.testing.assert_close((gx, gw), (rx, rw))  # straight through: the linear map's


def test_the_estimator_is_named_not_a_crash_or_a_mismatch():
    found = synthesize(CoarseLinear)
    report = gradsmith.check(CoarseLinear, *found.args, compat=False)
    errors = report.codes("error")
    assert "undeclared-estimator" in errors, errors
    assert "backward-error" not in errors and "gradient-mismatch" not in errors, errors
    declared = gradsmith.check(CoarseLinear, *found.args, surrogate=_linear, compat=False)
    assert declared.passed, declared.codes("error")


def test_a_planted_wrong_backward_fails():
    found = synthesize(CoarseLinearDoubled)
    report = gradsmith.check(CoarseLinearDoubled, *found.args, surrogate=_linear, compat=False)
    assert "surrogate-mismatch" in report.codes("error"), report.codes("error")
    assert not gradsmith.check(CoarseLinearDoubled, *found.args, compat=False).passed
