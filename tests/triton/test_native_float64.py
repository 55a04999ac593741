"""Kernels a GPU compiler rejects for float64 are checked in float32, saying so, not FAILed.

On an H200, three Liger kernels raised Triton's ``CompilationError`` natively from float64 inputs
("Loop-carried variable acc has initial type fp32 but is re-assigned to fp64"): a float32
accumulator that float64 loads turn into float64. Triton's interpreter accepts them. No GPU
here: the native compile is stood in for by wrapping our own kernel's launch so that float64
tensors raise the CompilationError a GPU compiler gives for it. On a machine with a CUDA GPU the
same tests run natively, where Triton's compiler itself rejects the kernel for float64.
"""

import ast

import pytest
import torch
import triton.language as tl
from torch.autograd import Function
from triton.compiler.errors import CompilationError

import gradsmith
import triton
from gradsmith.discovery import synthesize

BLOCK = 2
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"  # natively there


@triton.jit
def _sumsq_fwd(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = 0.0  # float32: float64 loads make it float64, which a GPU compiler rejects
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * n_cols + offs, mask=offs < n_cols, other=0.0)
        acc += tl.sum(x * x, axis=0)
    tl.store(out_ptr + row, acc)


def _sumsq(x):
    x = x.contiguous()
    out = torch.empty(x.shape[0], dtype=x.dtype, device=x.device)
    _sumsq_fwd[(x.shape[0],)](x, out, x.shape[1], BLOCK=BLOCK)
    return out


class RowSumSquares(Function):
    """Row-wise sum of squares through the kernel; backward 2 x g."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return _sumsq(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g[:, None]


class RowSumSquaresHalf(RowSumSquares):
    """Broken: the factor 2 is missing."""

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return x * g[:, None]


class RowSumSquaresSlightlyOff(RowSumSquares):
    """Broken: 0.3 % too large (2.006 x g), within float32's element-wise rtol (1.2 %)."""

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2.006 * x * g[:, None]

class RowSumSquaresBackwardRaises(RowSumSquares):
    """float64's forward does not compile and backward raises wherever forward runs."""

    @staticmethod
    def backward(ctx, g):
        raise RuntimeError("backward reads a buffer forward never wrote")


_SOURCE = "def _sumsq_fwd(x_ptr, out_ptr, n_cols, BLOCK):\n    acc = 0.0\n    for start in r:\n"
_WHY = ("AssertionError('Loop-carried variable acc has initial type fp32 but is re-assigned to "
        "fp64 in loop! Please make sure that the type stays consistent.')")


@pytest.fixture
def compiled_for_a_gpu(monkeypatch):
    """Launches of ``_sumsq_fwd`` behave as on a GPU: float64 tensors fail to compile."""
    if DEVICE == "cuda":
        return  # Triton's own compiler does
    interpreted = _sumsq_fwd.run

    def native(*args, **kwargs):
        if any(isinstance(a, torch.Tensor) and a.dtype == torch.float64 for a in args):
            node = ast.parse("for start in r:\n    pass").body[0]
            raise CompilationError(_SOURCE, node, _WHY)
        return interpreted(*args, **kwargs)

    monkeypatch.setattr(_sumsq_fwd, "run", native)


def _x(dtype=torch.float64):
    gen = torch.Generator().manual_seed(0)
    return torch.randn(3, 4, generator=gen, dtype=dtype).to(DEVICE).requires_grad_()


def test_stand_in_fails_to_compile_float64_and_runs_float32(compiled_for_a_gpu):
    with pytest.raises(CompilationError, match="fp64|float64"):
        RowSumSquares.apply(_x())
    x = _x(torch.float32)
    torch.testing.assert_close(RowSumSquares.apply(x), (x * x).sum(-1))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_checked_in_float32_with_the_compilers_reason(compiled_for_a_gpu, dtype):
    report = gradsmith.check(RowSumSquares, _x(dtype), compat=False)
    assert report.passed, report
    (note,) = [f for f in report.findings if f.code == "float64-unsupported"]
    assert note.severity == "info" and note.details["stage"] == "compile"
    assert note.details["checked_in"].startswith("float32")
    assert "do not compile for float64" in note.message and "CompilationError" in note.message
    # what the verdict rests on: the float32 gradient is autograd's of the same expression
    x = _x(torch.float32)
    (got,) = torch.autograd.grad(RowSumSquares.apply(x).sum(), x)
    (want,) = torch.autograd.grad((x * x).sum(), x)
    torch.testing.assert_close(got, want)


def test_wrong_gradient_still_fails_in_float32(compiled_for_a_gpu):
    report = gradsmith.check(RowSumSquaresHalf, _x(), compat=False)
    assert {(f.code, f.input) for f in report.findings if f.is_error} == {
        ("gradient-mismatch", "x")}
    assert "float64-unsupported" in report.codes()


def test_a_small_wrong_factor_fails_in_the_float32_fallback(compiled_for_a_gpu):
    # float64 fails to compile, so the check is float32's: a factor 1.003 everywhere is off
    # the same way along every direction and at every step (checker/systematic.py)
    x = _x()
    (got,) = torch.autograd.grad(RowSumSquaresSlightlyOff.apply(x.float()).sum(), x)
    (want,) = torch.autograd.grad((x * x).sum(), x)
    torch.testing.assert_close(got / want, torch.full_like(want, 1.003))  # wrong by hand
    report = gradsmith.check(RowSumSquaresSlightlyOff, _x(), compat=False)
    bad = [f for f in report.findings if f.is_error]
    assert [(f.code, f.input, f.details.get("mode")) for f in bad] == [
        ("gradient-mismatch", "x", "systematic")], report
    assert bad[0].details["ratio"] == pytest.approx(1.003, abs=5e-4)
    assert "float64-unsupported" in report.codes()

def test_backward_error_is_reported_not_raised(compiled_for_a_gpu):
    # forward raised in float64 and backward raises in float32: before, the check called
    # forward in float64 once more and the CompilationError escaped gradsmith.check
    report = gradsmith.check(RowSumSquaresBackwardRaises, _x(), compat=False)
    assert [f.code for f in report.findings if f.is_error] == ["backward-error"]
    assert "float64-unsupported" in report.codes()


def test_zero_config_inputs_say_why_they_are_float32(compiled_for_a_gpu):
    found = synthesize(RowSumSquares)
    assert found.args[0].dtype == torch.float32
    assert "float32: its Triton kernels do not compile for float64" in found.description
