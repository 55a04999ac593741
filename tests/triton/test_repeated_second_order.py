"""A further input set does not re-check the second order of a backward whose Triton kernels
an earlier set showed give autograd no graph (issue 18, round 13 task r: corpus 13's fused
router ran out of its 120 s, interpreted, on the fifth set's second order, which could only
repeat the first set's ``double-backward-unsupported`` warning). The first set still checks it.
"""

import torch
import triton.language as tl
from torch.autograd import Function

import gradsmith
import triton
from gradsmith.checker import reported


@triton.jit
def _cube(x_ptr, y_ptr, n, POWER: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    y = x * x * x if POWER == 3 else 3 * x * x
    tl.store(y_ptr + offs, y, mask=offs < n)


def _run(x, power):
    y = torch.empty_like(x)
    _cube[(triton.cdiv(x.numel(), 32),)](x, y, x.numel(), POWER=power, BLOCK=32)
    return y


class Cube(Function):
    """x**3 in a kernel; backward's kernel is right to first order but has no graph."""

    @staticmethod
    def forward(ctx, x):
        x = x.contiguous()
        ctx.save_for_backward(x)
        return _run(x, 3)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * _run(x, 2)


def _x():
    return torch.randn(6, dtype=torch.float64, generator=torch.Generator().manual_seed(0))


def test_first_set_checks_second_order():
    report = gradsmith.check(Cube, _x(), compat=False, checks=["gradients", "second_order"])
    assert "second_order" in report.checks
    assert "double-backward-unsupported" in report.codes("warning"), report
    assert report.passed


def test_a_further_set_does_not_repeat_it():
    with reported.already([("double-backward-unsupported", None)]):
        report = gradsmith.check(Cube, _x(), compat=False,
                                 checks=["gradients", "second_order"])
    assert "second_order" in report.skipped
    assert "earlier input set" in report.skipped["second_order"]
    assert "gradients" in report.checks and report.passed
