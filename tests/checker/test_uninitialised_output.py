"""A forward that returns uninitialised memory (issue 18, corpus 6: YOLOF's _NewEmptyTensorOp).

Written anew, reduced: forward ``x.new_empty(new_shape)``, meant for tensors with no elements.
On a non-empty input every value comparison compared garbage (gradient, non-contiguous,
determinism, second order, checkpoint mismatches, all errors); now one finding says why the
gradients are unverified, and a wrong backward next to it still fails.
"""

from __future__ import annotations

import torch
import torch.utils.deterministic
from torch.autograd import Function

import gradsmith

GARBAGE_CODES = {"gradient-mismatch", "noncontiguous-mismatch", "nondeterministic-backward",
                 "double-backward-mismatch", "checkpoint-mismatch", "nondeterministic-forward"}


class NewEmpty(Function):
    @staticmethod
    def forward(ctx, x, new_shape):
        ctx.shape = x.shape
        return x.new_empty(new_shape)

    @staticmethod
    def backward(ctx, grad):
        return NewEmpty.apply(grad, ctx.shape), None


class NewEmptyWrongShape(NewEmpty):
    @staticmethod
    def backward(ctx, grad):
        return grad.new_empty(ctx.shape[1:]), None  # planted: drops the first dimension


class DoubleUnwrittenGrad(Function):
    """Forward right (2x); planted: backward returns memory it never wrote."""

    @staticmethod
    def forward(ctx, x):
        return 2 * x

    @staticmethod
    def backward(ctx, g):
        return torch.empty_like(g)


class SquareIntoBuffer(Function):
    """An empty buffer filled completely is initialised: checked as usual."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        out = torch.empty_like(x)
        out.copy_(x * x)
        return out

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g


def _x(*shape: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(2)
    return torch.randn(*shape, generator=gen, dtype=torch.float64)


def _unwritten(x: torch.Tensor) -> torch.Tensor:
    """torch's own account of the output: with uninitialised memory filled, it is NaN."""
    before = torch.utils.deterministic.fill_uninitialized_memory
    torch.use_deterministic_algorithms(True)
    try:
        torch.utils.deterministic.fill_uninitialized_memory = True
        return NewEmpty.apply(x, x.shape)
    finally:
        torch.utils.deterministic.fill_uninitialized_memory = before
        torch.use_deterministic_algorithms(False)


def test_uninitialised_output_is_one_finding_not_a_pile_of_mismatches():
    x = _x(3, 4)
    assert bool(torch.isnan(_unwritten(x)).all())  # nothing forward computed: garbage
    report = gradsmith.check(NewEmpty, x, x.shape, compat=True)
    codes = {f.code for f in report.findings}
    assert "uninitialised-output" in codes, str(report)
    assert not codes & GARBAGE_CODES, str(report)
    assert not report.errors and report.incomplete and not report.passed, str(report)
    assert "gradients" in report.skipped and "uninitialised" in report.skipped["gradients"]
    # the check leaves torch's global settings as they were
    assert not torch.are_deterministic_algorithms_enabled()
    assert torch.utils.deterministic.fill_uninitialized_memory is True  # torch's default
    # on its contract, tensors with no elements, nothing is unwritten and nothing is wrong
    x = torch.zeros(0, 3, 4, dtype=torch.float64)
    report = gradsmith.check(NewEmpty, x, torch.Size([0, 5, 2]), compat=False)
    assert "uninitialised-output" not in {f.code for f in report.findings}, str(report)
    assert not report.errors, str(report)


# The planted wrong backwards below failed before this change too: they guard that skipping
# the value checks never turns a wrong backward into a pass.
def test_a_wrong_gradient_shape_next_to_it_still_fails():
    report = gradsmith.check(NewEmptyWrongShape, _x(3, 4), torch.Size([3, 4]), compat=False)
    assert not report.passed
    assert "grad-shape-mismatch" in {f.code for f in report.errors}, str(report)


def test_a_backward_returning_unwritten_memory_still_fails():
    x = _x(3, 4)
    a = x.clone().requires_grad_()
    (want,) = torch.autograd.grad((2 * a).sum(), a)  # autograd's gradient of the forward
    report = gradsmith.check(DoubleUnwrittenGrad, x, compat=False)
    assert "uninitialised-output" not in {f.code for f in report.findings}
    assert not report.passed and report.errors, str(report)
    assert bool((want == 2).all())


def test_a_filled_buffer_is_checked_as_usual():
    x = _x(3, 4)
    a = x.clone().requires_grad_()
    b = x.clone().requires_grad_()
    (want,) = torch.autograd.grad((a * a).sum(), a)
    (got,) = torch.autograd.grad(SquareIntoBuffer.apply(b).sum(), b)
    torch.testing.assert_close(got, want)
    report = gradsmith.check(SquareIntoBuffer, x, compat=False)
    assert report.passed, str(report)
    assert "uninitialised-output" not in {f.code for f in report.findings}
