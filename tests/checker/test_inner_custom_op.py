"""A Function that calls a custom op whose fake kernel is wrong: compile and export trace the
op with that kernel, so they failed with a bare compile error; the custom_op check now runs
``torch.library.opcheck`` on the ops forward calls and names the fake kernel (issue 21)."""

from __future__ import annotations

import torch

from gradsmith.checker import check


@torch.library.custom_op("gradsmith_test_inner::rowsum", mutates_args=())
def rowsum(x: torch.Tensor) -> torch.Tensor:
    return x.sum(-1)


@rowsum.register_fake
def _rowsum_fake_wrong_shape(x):
    return torch.empty_like(x)  # the real kernel drops the last dimension


@torch.library.custom_op("gradsmith_test_inner::rowsum_ok", mutates_args=())
def rowsum_ok(x: torch.Tensor) -> torch.Tensor:
    return x.sum(-1)


@rowsum_ok.register_fake
def _rowsum_fake(x):
    return x.new_empty(x.shape[:-1])


class RowSum(torch.autograd.Function):
    @staticmethod
    def forward(x):
        return rowsum(x) * 2

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.shape = inputs[0].shape

    @staticmethod
    def backward(ctx, grad):
        return grad.unsqueeze(-1).expand(ctx.shape) * 2


class RowSumOk(RowSum):
    @staticmethod
    def forward(x):
        return rowsum_ok(x) * 2


def _x():
    return torch.randn(3, 4, dtype=torch.float64, requires_grad=True)


def test_wrong_fake_kernel_of_a_called_op_is_named():
    # The reference: torch's own opcheck rejects the fake kernel.
    result = torch.library.opcheck(rowsum, (_x(),), raise_exception=False)
    assert "Shapes" in str(result["test_faketensor"])
    report = check(RowSum, _x(), compat=True)
    (found,) = [f for f in report.findings if f.code == "custom-op-fake-mismatch"]
    line = _rowsum_fake_wrong_shape.__code__.co_firstlineno
    assert "gradsmith_test_inner::rowsum" in found.message
    assert f"_rowsum_fake_wrong_shape at {__file__}:{line}" in found.message
    assert found.severity == "error" and not report.passed
    assert report.compat["compile"]["status"] == "fail"
    assert "custom-op-fake-mismatch" in report.compat["compile"]["codes"]
    assert "compile" in report.skipped  # the named cause, not a second bare compile error
    assert "compile-error" not in report.codes()


def test_right_fake_kernel_passes_and_compiles():
    report = check(RowSumOk, _x(), compat=True)
    assert not [f for f in report.findings if f.code.startswith("custom-op")], str(report)
    assert report.compat["compile"]["status"] == "ok", str(report)
    assert report.passed, str(report)
