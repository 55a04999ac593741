"""A forward that computes part of its output in float32 and passes the rest of its input through
unchanged is judged at float32's step: the passed-through float64 values say nothing about the
precision the rest was computed in (round 13 task w, reduced from corpus 13d's packed-qkv rotary
fallback, whose v slot is copied while q and k are rotated in float32: at a float64 step its
exact backward got a gradient-mismatch from finite differences' noise). A planted wrong rotation
still FAILs."""

from __future__ import annotations

import torch

import gradsmith


def _turn(a, b, cos, sin):
    a, b, cos, sin = a.float(), b.float(), cos.float(), sin.float()
    return a * cos - b * sin, a * sin + b * cos


class TurnHeadInFloat32(torch.autograd.Function):
    """Columns 0 and 1 turned by a per-row angle in float32; the other columns passed through."""

    @staticmethod
    def forward(ctx, x, cos, sin):
        out = x.clone()
        a, b = _turn(x[:, 0], x[:, 1], cos, sin)
        out[:, 0], out[:, 1] = a.to(x.dtype), b.to(x.dtype)
        ctx.save_for_backward(cos, sin)
        return out

    @staticmethod
    def backward(ctx, g):
        cos, sin = ctx.saved_tensors
        return TurnHeadInFloat32._back(g, cos, -sin), None, None  # the conjugate turn

    @staticmethod
    def _back(g, cos, sin):
        grad = g.clone()
        a, b = _turn(g[:, 0], g[:, 1], cos, sin)
        grad[:, 0], grad[:, 1] = a.to(g.dtype), b.to(g.dtype)
        return grad


class TurnHeadWrong(TurnHeadInFloat32):  # planted: the gradient turned forward again
    @staticmethod
    def backward(ctx, g):
        cos, sin = ctx.saved_tensors
        return TurnHeadInFloat32._back(g, cos, sin), None, None


def _args():
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(6, 5, dtype=torch.float64, generator=gen).requires_grad_()
    angle = torch.randn(6, dtype=torch.float64, generator=gen) * 3
    return x, angle.cos(), angle.sin()


def test_a_partly_float32_forward_with_its_exact_backward_passes():
    report = gradsmith.check(TurnHeadInFloat32, *_args(), compat=False)
    assert report.passed, [f.message for f in report.errors]
    # detected from the turned columns alone (the copied ones are float64 values); at a
    # float64 step finite differences of float32 values saw a spurious kink
    assert "low-precision-numerics" in report.codes() and "kink" not in report.codes()
    x, cos, sin = _args()  # independent reference: autograd of the turn in float64
    a, b = x[:, 0] * cos - x[:, 1] * sin, x[:, 0] * sin + x[:, 1] * cos
    want = torch.autograd.grad(torch.cat([a[:, None], b[:, None], x[:, 2:]], 1).sum(), x)[0]
    got = torch.autograd.grad(TurnHeadInFloat32.apply(x, cos, sin).sum(), x)[0]
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)


def test_the_planted_forward_turn_still_fails():
    report = gradsmith.check(TurnHeadWrong, *_args(), compat=False)
    assert "gradient-mismatch" in report.codes("error")
