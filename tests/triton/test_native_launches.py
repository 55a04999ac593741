"""Native (GPU-compiled) Triton launches are counted too, so a kernel backward without
@once_differentiable is one finding on a GPU as under the interpreter (on an H200, Liger-Kernel's
rows listed a double-backward mismatch per input). No GPU here: the launch itself is stood in for."""

import pytest
import torch
from torch.autograd import Function

import gradsmith
from gradsmith import _triton
from gradsmith._triton import native


def test_native_launches_are_counted_once_wrapped(monkeypatch):
    from triton.runtime.jit import JITFunction

    calls = []
    monkeypatch.setattr(JITFunction, "run", lambda self, *a, **k: calls.append(a) or "ran")
    before = native.LAUNCHES[0]
    assert native.count() == "applied"
    assert native.count() == "applied"  # idempotent: wrapped once
    assert JITFunction.run(object(), 1, grid=(1,)) == "ran"
    JITFunction.run(object())
    assert native.LAUNCHES[0] == before + 2 and calls == [(1,), ()]


class _KernelBackward(Function):
    # backward "launches a kernel": a result computed outside autograd's view, as a kernel's is
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * x * w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        native.LAUNCHES[0] += 1  # what the wrapped JITFunction.run counts
        with torch.no_grad():
            return 2 * x * w * g, x * x * g


def test_kernel_backward_is_one_finding_with_native_launches(monkeypatch):
    monkeypatch.setitem(_triton._state, "native", "applied")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)  # native: not interpreting
    gen = torch.Generator().manual_seed(0)
    x, w = (torch.randn(5, dtype=torch.float64, generator=gen).requires_grad_() for _ in "xw")
    report = gradsmith.check(_KernelBackward, x, w, checks=["gradients", "second_order"])
    assert report.passed, report  # a missing second derivative: a warning (issue 18)
    bad = [f for f in report.findings if f.check == "second_order"]
    assert [f.code for f in bad] == ["double-backward-unsupported"], bad
    assert bad[0].details["cause"] == "kernel-backward" and "Triton kernels" in bad[0].message
    assert bad[0].details["inputs"] == ["x", "w", "grad_out"] and "@once_differentiable" in bad[0].hint
    # The harm is real: autograd's second derivative through it is 0, the true one (2 w) is not.
    (gx,) = torch.autograd.grad(_KernelBackward.apply(x, w).sum(), x, create_graph=True)
    assert gx.grad_fn is None
    with pytest.raises(RuntimeError):
        torch.autograd.grad(gx.sum(), x)


class _KernelBackwardWrongGraph(Function):
    # backward "launches a kernel" yet returns a result with a graph whose derivative is wrong:
    # 2 (2 x.detach() - x) w g has the value 2 x w g, and the derivative -2 w g in x (not 2 w g)
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * x * w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        native.LAUNCHES[0] += 1
        return 2 * (2 * x.detach() - x) * w * g, x * x * g


def test_kernel_backward_with_a_partial_second_derivative_is_the_same_warning(monkeypatch):
    monkeypatch.setitem(_triton._state, "native", "applied")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    gen = torch.Generator().manual_seed(0)
    x, w = (torch.randn(5, dtype=torch.float64, generator=gen).requires_grad_() for _ in "xw")
    assert torch.autograd.gradcheck(_KernelBackwardWrongGraph.apply, (x, w))
    # the reference: autograd's derivative is non-zero and not x * x * w's (2 w g in x)
    (gx,) = torch.autograd.grad(_KernelBackwardWrongGraph.apply(x, w).sum(), x, create_graph=True)
    (hx,) = torch.autograd.grad(gx.sum(), x)
    torch.testing.assert_close(hx, -2 * w.detach())
    report = gradsmith.check(_KernelBackwardWrongGraph, x, w,
                             checks=["gradients", "second_order"])
    assert report.passed and not report.errors, report  # partial: a warning (issue 18)
    (bad,) = [f for f in report.findings if f.check == "second_order"]
    assert bad.code == "double-backward-unsupported" and bad.details["cause"] == "kernel-backward"
    assert bad.details["partial"] == ["x"] and bad.details["zero"] == []
    assert "only part of the second derivative for x" in bad.message
