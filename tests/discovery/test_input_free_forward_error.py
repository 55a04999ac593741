"""A forward that raises on every call for a reason no input can change is a FAIL, not a skip.

``1 / torch.sqrt(2 * torch.pi)`` raises ``TypeError`` (``sqrt`` of a Python float) whatever the
inputs: the raising call reads a literal and a module constant. Before this change every layout
failed, synthesis gave up and the row was a skip that hid the defect (corpus 7b G-FairAttack
GaussianKernel). An error whose raising call reads an argument, a ctx value or a local, or that
some input may never reach, stays a skip. Reduced cases written here; the reference is the
raising expression run on its own, and autograd of the same Gaussian for the working ones.
"""

from __future__ import annotations

import json
import math

import pytest
import torch
from torch.autograd import Function

import gradsmith
from gradsmith.discovery.input_free import input_free
from gradsmith.discovery.synthesize import NoInputs, Synthesized, synthesize


class RootTwoPiGauss(Function):
    """A standard normal density whose constant is computed with torch on a float."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return 1 / torch.sqrt(2 * torch.pi) * torch.exp(-x * x / 2)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return -x / torch.sqrt(2 * torch.pi) * torch.exp(-x * x / 2) * g


class ReadsItsInput(Function):
    """Raises on every call too, but the raising call reads x: it stays a skip."""

    @staticmethod
    def forward(ctx, x):
        return x * torch.sqrt(x.shape[-1] * 2.0)

    @staticmethod
    def backward(ctx, g):
        return g


class ReadsCtxAndLocal(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.c = 2.0
        c = 2 * torch.pi
        return x * torch.sqrt(ctx.c) * torch.sqrt(c)

    @staticmethod
    def backward(ctx, g):
        return g


class EarlyReturn(Function):
    """Some inputs return before the raising line."""

    @staticmethod
    def forward(ctx, x):
        if x.dim() == 1:
            return x.clone()
        return x * torch.sqrt(2 * torch.pi)

    @staticmethod
    def backward(ctx, g):
        return g


class Abstract(Function):
    @staticmethod
    def forward(ctx, x):
        raise TypeError("subclasses define forward")

    @staticmethod
    def backward(ctx, g):
        return g


class CudaOnly(Function):
    """Raises TypeError on a CPU-only machine (no CUDA tensor types), runs on a GPU."""

    @staticmethod
    def forward(ctx, x):
        return x * torch.cuda.FloatTensor(1).fill_(2.0).to(x)

    @staticmethod
    def backward(ctx, g):
        return 2 * g


SETTINGS = None  # filled in by a training script at run time


class ReadsASetting(Function):
    @staticmethod
    def forward(ctx, x):
        return x * torch.sqrt(SETTINGS)

    @staticmethod
    def backward(ctx, g):
        return g


class MathGauss(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.exp(-x * x / 2) / math.sqrt(2 * math.pi)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return -x * torch.exp(-x * x / 2) / math.sqrt(2 * math.pi) * g


class MathGaussDoubled(MathGauss):
    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return -2 * x * torch.exp(-x * x / 2) / math.sqrt(2 * math.pi) * g


def _raised(fn, *args):
    with pytest.raises(Exception) as info:
        fn.apply(*args)
    return info.value


def test_the_raising_call_alone_raises_whatever_the_inputs():
    with pytest.raises(TypeError, match="sqrt"):
        torch.sqrt(2 * torch.pi)  # the reference: the expression by itself
    for x in (torch.randn(3, dtype=torch.float64), torch.randn(2, 5), torch.zeros(())):
        found = input_free(_raised(RootTwoPiGauss, x))
        assert found is not None and found["call"] == "torch.sqrt(2 * torch.pi)", found


def test_calls_that_read_an_argument_ctx_or_local_are_not_input_free():
    x = torch.randn(2, 3, dtype=torch.float64)
    for fn in (ReadsItsInput, ReadsCtxAndLocal, EarlyReturn, Abstract, ReadsASetting):
        assert input_free(_raised(fn, x)) is None, fn.__name__


@pytest.mark.skipif(torch.cuda.is_available(), reason="runs where CUDA exists")
def test_an_error_of_the_machine_is_not_the_codes():
    exc = _raised(CudaOnly, torch.randn(3, dtype=torch.float64))
    assert isinstance(exc, TypeError)  # the very type input-free errors have
    assert input_free(exc) is None


def test_synthesis_gives_inputs_and_the_check_fails_with_the_cause():
    found = synthesize(RootTwoPiGauss)
    assert isinstance(found, Synthesized) and not found.doubt, found
    assert "torch.sqrt(2 * torch.pi)" in found.description
    report = gradsmith.check(RootTwoPiGauss, *found.args, compat=False)
    assert report.verdict == "FAILED" and "forward-error" in report.codes("error"), report
    (finding,) = [f for f in report.errors if f.code == "forward-error"]
    assert finding.details["cause"] == "input-free"
    assert "reads no argument of forward" in finding.message and "math" in finding.hint


def test_an_error_reading_an_argument_stays_a_skip():
    assert isinstance(synthesize(ReadsItsInput), NoInputs)


def test_working_constants_pass_and_a_planted_wrong_backward_fails():
    x = torch.randn(3, 4, dtype=torch.float64)
    xl = x.clone().requires_grad_(True)
    MathGauss.apply(xl).sum().backward()
    xr = x.clone().requires_grad_(True)
    (torch.exp(-xr * xr / 2) / math.sqrt(2 * math.pi)).sum().backward()
    torch.testing.assert_close(xl.grad, xr.grad)
    assert gradsmith.check(MathGauss, x.requires_grad_(True), compat=False).passed
    report = gradsmith.check(MathGaussDoubled, x, compat=False)
    assert "gradient-mismatch" in report.codes("error"), report


SOURCE = '''
import torch
from torch.autograd import Function


class Gauss(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return 1 / torch.sqrt(2 * torch.pi) * torch.exp(-x * x / 2)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return -x / torch.sqrt(2 * torch.pi) * torch.exp(-x * x / 2) * g
'''


def test_the_command_line_row_fails_instead_of_skipping(tmp_path, monkeypatch, capsys,
                                                         warm_worker_template):
    from gradsmith.cli import main

    (tmp_path / "gauss.py").write_text(SOURCE)
    monkeypatch.chdir(tmp_path)
    code = main(["check", "gauss.py", "--format", "json", "--timeout", "120"])
    (row,) = json.loads(capsys.readouterr().out)["results"]
    assert code != 0
    assert row["verdict"] == "fail" and row["error"] is None, row
    codes = {f["code"] for f in row["report"]["findings"] if f["severity"] == "error"}
    assert codes == {"forward-error"}, row
