"""A backward that casts its gradient to float32 (``.float()``) is a dtype and precision
problem for float64 and bfloat16 users, not a wrong gradient: a warning that says so, and its
values are judged at the precision it returns (first and second order)."""

from __future__ import annotations

import pytest
import torch
from torch.autograd import Function

import gradsmith


class Float32Backward(Function):
    """(x + 1000)^2 - 2000 x = x^2 + 1e6, backward 2 (x + 1000) - 2000 computed in float32:
    the cancellation leaves float32's rounding (about 1e-4) in a gradient of about 1."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return (x + 1000) ** 2 - 2000 * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return (2 * (x.float() + 1000) - 2000) * g.float()


class Float32BackwardWrong(Float32Backward):
    """The same cast, and a wrong factor 2.1 on top."""

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return (2.1 * (x.float() + 1000) - 2100) * g.float()


def _x(dtype=torch.float64):
    return torch.randn(5, generator=torch.Generator().manual_seed(0), dtype=torch.float64
                       ).to(dtype)


def test_the_cast_backward_is_right_to_float32_precision():
    x = _x().requires_grad_()
    (want,) = torch.autograd.grad(((x + 1000) ** 2 - 2000 * x).sum(), x)  # reference: 2x
    (got,) = torch.autograd.grad(Float32Backward.apply(x).sum(), x)
    assert got.dtype == torch.float64  # autograd cast it back
    assert not torch.allclose(got, want, rtol=1e-6, atol=1e-8)  # float64 precision: no
    assert torch.allclose(got, want, rtol=0, atol=1e-3)  # float32 precision: yes


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_a_float32_gradient_is_a_precision_warning_not_a_wrong_gradient(dtype):
    report = gradsmith.check(Float32Backward, _x(dtype), compat=False)
    assert report.passed, str(report)
    (finding,) = [f for f in report.findings if f.code == "grad-dtype-mismatch"]
    assert finding.severity == "warning" and finding.input == "x"
    assert "precision problem, not a wrong gradient" in finding.message
    assert "float32" in finding.message and ".float()" in finding.message


def test_a_wrong_gradient_behind_the_cast_still_fails():
    report = gradsmith.check(Float32BackwardWrong, _x(), compat=False)
    assert "gradient-mismatch" in report.codes("error"), str(report)
