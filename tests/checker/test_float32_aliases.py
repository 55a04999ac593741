"""A backward that writes into an input only where ``.float()`` aliases it (float32 inputs) is an
``input-mutated-in-backward`` error once a second forward on the same arguments differs (round 13
task w, reduced from corpus 13d's rotary embedding fallback, whose conjugate rotation negates the
caller's float32 sin cache in place). The out-of-place conjugate passes, and a planted wrong
rotation still FAILs on its gradient."""

from __future__ import annotations

import torch

import gradsmith


def _rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def _rotary(x, cos, sin, conjugate=False, in_place=True):
    x, cos, sin = x.float(), cos.float(), sin.float()  # float32 inputs: the caller's tensors
    if conjugate:
        sin = torch.neg_(sin) if in_place else -sin
    return x * cos + _rotate_half(x) * sin


class RotaryNegatesSin(torch.autograd.Function):  # the defect
    @staticmethod
    def forward(ctx, x, cos, sin):
        ctx.save_for_backward(cos, sin)
        return _rotary(x, cos, sin)

    @staticmethod
    def backward(ctx, g):
        cos, sin = ctx.saved_tensors
        return _rotary(g, cos, sin, conjugate=True), None, None


class Rotary(RotaryNegatesSin):  # the out-of-place conjugate rotation
    @staticmethod
    def backward(ctx, g):
        cos, sin = ctx.saved_tensors
        return _rotary(g, cos, sin, conjugate=True, in_place=False), None, None


class RotaryForward(RotaryNegatesSin):  # planted: rotates the gradient forward again
    @staticmethod
    def backward(ctx, g):
        cos, sin = ctx.saved_tensors
        return _rotary(g, cos, sin, in_place=False), None, None


def _args(dtype=torch.float64):
    """x (seq, dim) and the duplicated-half caches cat(freqs, freqs) rotary users pass."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(5, 8, dtype=dtype, generator=gen).requires_grad_()
    angles = torch.rand(5, 4, dtype=dtype, generator=gen) * 3
    angles = torch.cat((angles, angles), dim=-1)
    return x, angles.cos(), angles.sin()


def test_a_backward_negating_the_callers_float32_cache_fails():
    report = gradsmith.check(RotaryNegatesSin, *_args(), compat=False)
    assert not report.passed
    (found,) = [f for f in report.errors if f.code == "input-mutated-in-backward"]
    assert found.input == "sin" and "different output" in found.message
    # Independent demonstration: float32 caches, one training step, then the same forward.
    x, cos, sin = _args(torch.float32)
    first = RotaryNegatesSin.apply(x, cos, sin)
    first.sum().backward()
    assert torch.equal(sin, -_args(torch.float32)[2])
    assert not torch.allclose(RotaryNegatesSin.apply(x, cos, sin), first)


def test_the_out_of_place_conjugate_rotation_passes():
    report = gradsmith.check(Rotary, *_args(), compat=False)
    assert "input-mutated-in-backward" not in report.codes()
    assert not report.codes("error"), report.codes("error")
    x, cos, sin = _args()
    want = torch.autograd.grad(_rotary(x, cos, sin).sum(), x)[0]  # autograd of the expression
    got = torch.autograd.grad(Rotary.apply(x, cos, sin).sum(), x)[0]
    torch.testing.assert_close(got.double(), want.double())


def test_the_planted_forward_rotation_still_fails():
    report = gradsmith.check(RotaryForward, *_args(), compat=False)
    assert "gradient-mismatch" in report.codes("error")
    assert "input-mutated-in-backward" not in report.codes()
