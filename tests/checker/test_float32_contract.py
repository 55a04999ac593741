"""A Function that reads its tensor's memory as float32 is checked in float32 (issue 18,
round 13 task n; reduced from sequence losses that hand ``t.data_ptr()`` to a graph library
reading float32: float64 inputs gave a piecewise constant, or infinite, loss and a false
``undeclared-estimator``/``precision-loss``/``nan-output``). The float64 run is shown broken by
the Function's own forward (far from the float32 run at the same values); a wrong backward
still fails in float32, and a Function computing in float32 correctly stays in float64."""

from __future__ import annotations

import torch
from torch.autograd import Function

import gradsmith


def as_float32(t: torch.Tensor) -> torch.Tensor:
    """What such a library does: the first ``numel`` float32 numbers of the tensor's bytes."""
    flat = t.detach().contiguous().reshape(-1)
    raw = flat.view(torch.uint8)[: 4 * flat.numel()]
    return raw.view(torch.float32).clone().reshape(t.shape)


class MemoryLogCosh(Function):
    @staticmethod
    def forward(ctx, x):
        v = as_float32(x)
        ctx.save_for_backward(v)
        return torch.log(torch.cosh(v)).sum()

    @staticmethod
    def backward(ctx, g):
        (v,) = ctx.saved_tensors
        return g * torch.tanh(v)


class MemoryLogCoshWrong(MemoryLogCosh):
    @staticmethod
    def backward(ctx, g):
        (v,) = ctx.saved_tensors
        return g * torch.tanh(v) * 1.5  # planted: a wrong factor


class CastLogCosh(Function):
    """Computes in float32 by casting (not by reading memory): float64 is not broken."""

    @staticmethod
    def forward(ctx, x):
        v = x.float()
        ctx.save_for_backward(v)
        return torch.log(torch.cosh(v)).sum()

    @staticmethod
    def backward(ctx, g):
        (v,) = ctx.saved_tensors
        return g * torch.tanh(v)


def _x(dtype=torch.float64) -> torch.Tensor:
    gen = torch.Generator().manual_seed(0)
    return torch.randn(3, 4, generator=gen, dtype=dtype)


def test_float64_memory_is_garbage_and_float32_is_the_reference():
    x = _x()
    assert not torch.allclose(MemoryLogCosh.apply(x), MemoryLogCosh.apply(x.float()))
    x32 = x.float().requires_grad_()
    (got,) = torch.autograd.grad(MemoryLogCosh.apply(x32), x32)
    y = x.float().requires_grad_()
    (want,) = torch.autograd.grad(torch.log(torch.cosh(y)).sum(), y)
    torch.testing.assert_close(got, want)


def test_a_function_reading_float32_memory_is_checked_in_float32_and_passes():
    report = gradsmith.check(MemoryLogCosh, _x())
    assert report.passed, report.summary()
    assert "float32-contract" in report.codes("warning")
    assert not report.codes("error") & {"undeclared-estimator", "precision-loss"}


def test_a_wrong_backward_still_fails_in_float32():
    report = gradsmith.check(MemoryLogCoshWrong, _x())
    assert not report.passed and "gradient-mismatch" in report.codes("error"), report.summary()
    assert "float32-contract" in report.codes("warning")


def test_a_function_that_casts_to_float32_stays_in_float64():
    report = gradsmith.check(CastLogCosh, _x())
    assert report.passed, report.summary()
    assert "float32-contract" not in report.codes()


class NoisyCast(Function):
    """Draws noise and computes in float32: float32 and float64 draw different numbers, which
    is no broken float64 run."""

    @staticmethod
    def forward(ctx, x):
        v = (x + torch.rand_like(x)).float()
        ctx.save_for_backward(v)
        return torch.log(torch.cosh(v)).sum()

    @staticmethod
    def backward(ctx, g):
        (v,) = ctx.saved_tensors
        return g * torch.tanh(v)


def test_a_random_forward_is_not_called_broken():
    report = gradsmith.check(NoisyCast, _x())
    assert "float32-contract" not in report.codes(), report.summary()
