"""A float32 Function whose float64 *backward* is broken is checked in float32 (issue 18, round
13 task r). Reduced from a fused router (corpus 13): forward returns float32 whatever it is
given and agrees with its float32 run, but its backward hands a float64 tensor to a kernel
written for float32 tiles, and the input gradient comes out wrong for float64 only; the check
ran in float64 and reported the kernel's float64 artefact. Now the float64 gradients, far from
the float32 ones at the same values and grad_output, show float64 outside the contract. A wrong
backward still fails in float32, and a Function whose backward is right in both dtypes stays in
float64.
"""

from __future__ import annotations

import torch
from torch.autograd import Function

import gradsmith


def as_float32(t: torch.Tensor) -> torch.Tensor:
    """What a float32 kernel does with a pointer: the first ``numel`` float32s of the bytes."""
    flat = t.detach().contiguous().reshape(-1)
    raw = flat.view(torch.uint8)[: 4 * flat.numel()]
    return raw.view(torch.float32).clone().reshape(t.shape)


class Float32Tile(Function):
    """y = tanh(x) * w in float32; backward reads w's memory as float32 (right for float32)."""

    factor = 1.0

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return torch.tanh(x.float()) * w.float()

    @classmethod
    def backward(cls, ctx, g):
        x, w = ctx.saved_tensors
        t = torch.tanh(x.float())
        gx = g.float() * (1 - t * t) * as_float32(w) * cls.factor
        return gx.to(x.dtype), (g.float() * t).to(w.dtype)


class Float32TileWrong(Float32Tile):
    factor = 1.5  # planted: a wrong scale of the input gradient


class CastTile(Function):
    """Same forward, a backward that casts: right in both dtypes."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return torch.tanh(x.float()) * w.float()

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        t = torch.tanh(x.float())
        return (g.float() * (1 - t * t) * w.float()).to(x.dtype), (g.float() * t).to(w.dtype)


def _xw(dtype=torch.float64):
    gen = torch.Generator().manual_seed(0)
    return (torch.randn(3, 4, generator=gen, dtype=dtype),
            torch.randn(3, 4, generator=gen, dtype=dtype))


def test_float64_gradient_is_garbage_and_float32_is_the_derivative():
    x, w = (t.requires_grad_() for t in _xw(torch.float32))
    (gx,) = torch.autograd.grad(Float32Tile.apply(x, w).sum(), x)
    (want,) = torch.autograd.grad((torch.tanh(x) * w).sum(), x)
    torch.testing.assert_close(gx, want)
    x64, w64 = (t.requires_grad_() for t in _xw())
    (gx64,) = torch.autograd.grad(Float32Tile.apply(x64, w64).sum(), x64)
    assert not torch.allclose(gx64.float(), want, atol=1e-2)


def test_a_broken_float64_backward_is_checked_in_float32_and_passes():
    report = gradsmith.check(Float32Tile, *_xw(), compat=False)
    assert report.passed, report.summary()
    found = [f for f in report.findings if f.code == "float32-contract"]
    assert found and "gradients" in found[0].message, report.summary()


def test_a_wrong_backward_still_fails_in_float32():
    report = gradsmith.check(Float32TileWrong, *_xw(), compat=False)
    assert not report.passed and "gradient-mismatch" in report.codes("error"), report.summary()
    assert "float32-contract" in report.codes("warning")


def test_a_backward_right_in_both_dtypes_stays_in_float64():
    report = gradsmith.check(CastTile, *_xw(), compat=False)
    assert report.passed, report.summary()
    assert "float32-contract" not in report.codes()


def test_a_further_input_set_starts_in_float32():
    """An earlier set's float32-contract decides the dtype of the next (no float64 run, no
    comparison: seconds a set with interpreted kernels); the verdicts stay the same."""
    calls = []

    class Counted(Float32Tile):
        @staticmethod
        def forward(ctx, x, w):
            calls.append(x.dtype)
            return Float32Tile.forward(ctx, x, w)

    class CountedWrong(Counted):
        factor = 1.5

    from gradsmith.checker import reported

    with reported.already([("float32-contract", None)]):
        report = gradsmith.check(Counted, *_xw(), compat=False, checks=["gradients"])
        wrong = gradsmith.check(CountedWrong, *_xw(), compat=False, checks=["gradients"])
    assert torch.float64 not in calls
    assert report.passed, report.summary()
    assert "float32-contract" not in report.codes()  # the earlier set's finding says it
    assert "gradient-mismatch" in wrong.codes("error"), wrong.summary()
