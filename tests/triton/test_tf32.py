"""float32 checks of kernels whose tl.dot runs in TF32 natively on a GPU.

On an H200, attorch's linear layer (tl.dot in TF32) got a gradient-mismatch of 19 % that the
CPU run did not give: float32's finite-difference step moved inputs by a few TF32 spacings only.
No GPU here: the stand-in rounds its operands to TF32 (10-bit mantissa) on the CPU, and counts
its "launches" the way the wrapped ``JITFunction.run`` does for a native launch of our own
kernel with a default ``tl.dot``.
"""

import pytest
import torch
import triton.language as tl
from torch.autograd import Function
from torch.autograd.function import once_differentiable

import gradsmith
import triton
from gradsmith import _triton
from gradsmith._triton import native
from gradsmith._triton.dots import tf32_dots


# -- our own kernels, for what the code says about TF32 ---------------------------------------
@triton.jit
def _mm_default(a_ptr, b_ptr, c_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    a = tl.load(a_ptr + offs[:, None] * N + offs[None, :])
    b = tl.load(b_ptr + offs[:, None] * N + offs[None, :])
    tl.store(c_ptr + offs[:, None] * N + offs[None, :], tl.dot(a, b))


@triton.jit
def _mm_ieee(a_ptr, b_ptr, c_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    a = tl.load(a_ptr + offs[:, None] * N + offs[None, :])
    b = tl.load(b_ptr + offs[:, None] * N + offs[None, :])
    tl.store(c_ptr + offs[:, None] * N + offs[None, :], tl.dot(a, b, input_precision="ieee"))


@triton.jit
def _mm_no_tf32(a_ptr, b_ptr, c_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    a = tl.load(a_ptr + offs[:, None] * N + offs[None, :])
    b = tl.load(b_ptr + offs[:, None] * N + offs[None, :])
    tl.store(c_ptr + offs[:, None] * N + offs[None, :], tl.dot(a, b, allow_tf32=False))


@triton.jit
def _mm_flag(a_ptr, b_ptr, c_ptr, N: tl.constexpr, TF32: tl.constexpr):
    offs = tl.arange(0, N)
    a = tl.load(a_ptr + offs[:, None] * N + offs[None, :])
    b = tl.load(b_ptr + offs[:, None] * N + offs[None, :])
    tl.store(c_ptr + offs[:, None] * N + offs[None, :], tl.dot(a, b, allow_tf32=TF32))


@triton.jit
def _dot(a, b):
    return tl.dot(a, b)


@triton.jit
def _mm_helper(a_ptr, b_ptr, c_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    a = tl.load(a_ptr + offs[:, None] * N + offs[None, :])
    b = tl.load(b_ptr + offs[:, None] * N + offs[None, :])
    tl.store(c_ptr + offs[:, None] * N + offs[None, :], _dot(a, b))


@triton.jit
def _scale(x_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(x_ptr + offs, 2 * tl.load(x_ptr + offs))


def test_kernels_with_a_tf32_dot_are_read_from_their_code(monkeypatch):
    assert tf32_dots(_mm_default) and tf32_dots(_mm_helper) and tf32_dots(_mm_flag)
    assert not tf32_dots(_mm_ieee) and not tf32_dots(_mm_no_tf32) and not tf32_dots(_scale)
    monkeypatch.setenv("TRITON_F32_DEFAULT", "ieee")  # Triton's own default for silent calls
    assert not tf32_dots(_mm_default) and tf32_dots(_mm_flag)


def test_the_kernels_compute_a_matmul():
    # what they are read as: the plain product (IEEE float32 in the interpreter, TF32 natively)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    a, b = (torch.randn(16, 16, generator=torch.Generator().manual_seed(i)).to(device)
            for i in (1, 2))
    c = torch.empty(16, 16, device=device)
    _mm_default[(1,)](a, b, c, N=16)
    loose = {"rtol": 1e-2, "atol": 2e-2} if device == "cuda" else {}
    torch.testing.assert_close(c, a.double() @ b.double(), check_dtype=False, **loose)


def test_native_launches_of_tf32_kernels_are_counted(monkeypatch):
    from triton.runtime.jit import JITFunction

    monkeypatch.setattr(JITFunction, "run", lambda self, *a, **k: None)
    native.count()
    before, tf32 = native.LAUNCHES[0], native.TF32[0]
    JITFunction.run(_mm_default)
    JITFunction.run(_mm_ieee)
    assert native.LAUNCHES[0] == before + 2 and native.TF32[0] == tf32 + 1
    assert "_mm_default" in native.TF32_KERNELS and "_mm_ieee" not in native.TF32_KERNELS


# -- a stand-in for a native TF32 kernel: y = 2 * x @ w ------------------------------------------
def tf32(t):
    """float32 rounded to TF32 as a GPU's cvt.rna.tf32.f32 does (nearest, ties away from zero):
    10 explicit mantissa bits, the low 13 bits of the float32 cleared."""
    bits = t.float().contiguous().view(torch.int32)
    return ((bits + 0x1000) & -0x2000).view(torch.float32)


def _mm(a, b):
    native.note_tf32(_mm_default)  # what the wrapped JITFunction.run does on a native launch
    native.LAUNCHES[0] += 1
    return tf32(a) @ tf32(b)


class ScaledMatmul(Function):
    """Correct: forward and backward products in TF32, float32 out, like the kernels."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return (2 * _mm(x.float(), w.float())).to(x.dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        g = g.float()
        return ((2 * _mm(g, w.float().T)).to(x.dtype),
                (2 * _mm(x.float().T, g)).to(w.dtype))


class ScaledMatmulNoFactor(ScaledMatmul):
    """Broken: the factor 2 is missing from x's gradient."""

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        g = g.float()
        return _mm(g, w.float().T).to(x.dtype), (2 * _mm(x.float().T, g)).to(w.dtype)


class ScaledMatmulTransposed(ScaledMatmul):
    """Broken: x's gradient multiplies by w instead of w^T (w is square)."""

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        g = g.float()
        return (2 * _mm(g, w.float())).to(x.dtype), (2 * _mm(x.float().T, g)).to(w.dtype)


def _inputs(dtype=torch.float32):
    gen = torch.Generator().manual_seed(0)
    x = (8 * torch.randn(3, 4, generator=gen, dtype=torch.float64)).to(dtype)
    w = torch.randn(4, 4, generator=gen, dtype=torch.float64).to(dtype)
    return x.requires_grad_(), w.requires_grad_()


@pytest.fixture
def natively(monkeypatch):
    """Native launches are counted (a GPU machine: no interpreter)."""
    monkeypatch.setitem(_triton._state, "native", "applied")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)


def _reference_grads(fn, x, w):
    """The Function's gradients and float64 autograd's of 2 x @ w, for one grad_output."""
    g = torch.randn(3, 4, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    got = torch.autograd.grad(fn.apply(x, w), (x, w), g.to(x.dtype))
    x64, w64 = (t.detach().double().requires_grad_() for t in (x, w))
    want = torch.autograd.grad(2 * x64 @ w64, (x64, w64), g)
    return [(a.double() - b).abs().max().item() / b.abs().max().item() for a, b in zip(got, want)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_correct_tf32_kernel_passes_with_the_tf32_note(natively, dtype):
    x, w = _inputs(dtype)
    report = gradsmith.check(ScaledMatmul, x, w, compat=False)
    assert report.passed, report
    (note,) = [f for f in report.findings if f.code == "low-precision-numerics"]
    assert note.details["computes_in"] == "tf32" and note.details["reduction"] == 4
    assert "_mm_default" in note.message
    # the planted stand-in is right, to TF32's precision (2^-11 per operand)
    assert max(_reference_grads(ScaledMatmul, *_inputs())) < 4e-3


def test_float32_calibration_alone_fails_the_correct_kernel(natively, monkeypatch):
    # the H200's artifact: a step of ~1e-2 moves inputs of |x| ~ 8 by a few TF32 spacings
    from gradsmith.checker import tf32

    monkeypatch.setattr(tf32, "calibrate", lambda *args: None)
    report = gradsmith.check(ScaledMatmul, *_inputs(), compat=False)
    assert ("gradient-mismatch", "x") in {(f.code, f.input) for f in report.findings}


def test_tolerance_follows_from_tf32_and_the_reduction_length(natively):
    x, w = _inputs()
    report = gradsmith.check(ScaledMatmul, x, w, compat=False, checks=["gradients"])
    (note,) = [f for f in report.findings if f.code == "low-precision-numerics"]
    u, h, m = 2.0 ** -11, note.details["h"], float(x.detach().abs().max())
    assert h == pytest.approx(2 * (2 * u) ** (1 / 3))
    assert note.details["rtol"] == pytest.approx(12 * u * 4 ** 0.5 + 2 * u * (m + h) / h)
    assert note.details["rtol"] < 0.5  # a wrong factor 2 (100 %) cannot hide in it


@pytest.mark.parametrize("fn", [ScaledMatmulNoFactor, ScaledMatmulTransposed])
def test_wrong_gradient_still_fails_under_the_tf32_tolerance(natively, fn):
    report = gradsmith.check(fn, *_inputs(), compat=False)
    assert {(f.code, f.input) for f in report.findings if f.is_error} == {
        ("gradient-mismatch", "x")}
    assert any(f.details.get("computes_in") == "tf32" for f in report.findings)
    err_x, err_w = _reference_grads(fn, *_inputs())
    assert err_x > 0.3 and err_w < 4e-3  # the planted error is in x's gradient only


class Float64Matmul(Function):
    """Computes in float64 (a tl.dot on float64 operands is IEEE): x's gradient 1 % off, which
    the TF32 tolerance would let pass."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        native.note_tf32(_mm_default)
        return x @ w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return (1 + 1e-2) * g @ w.T, x.T @ g


def test_float64_checks_are_not_loosened(natively):
    report = gradsmith.check(Float64Matmul, *_inputs(torch.float64), compat=False)
    assert ("gradient-mismatch", "x") in {(f.code, f.input) for f in report.findings}
    assert "low-precision-numerics" not in report.codes()


def test_interpreted_runs_get_no_tf32_calibration(monkeypatch):
    monkeypatch.delitem(_triton._state, "native", raising=False)  # the interpreter ran them
    report = gradsmith.check(ScaledMatmul, *_inputs(), compat=False, checks=["gradients"])
    assert not any(f.details.get("computes_in") == "tf32" for f in report.findings)


def test_reference_runs_its_own_precision_with_tf32_matmuls(natively):
    # reference=: the tolerance is the reference's own float32 error; where the Function's
    # products ran in TF32, CUDA matmuls in that run are TF32 too (float64's truth is not)
    seen = []

    def reference(x, w):
        seen.append((x.dtype, torch.backends.cuda.matmul.allow_tf32))
        return 2 * x @ w

    report = gradsmith.check(ScaledMatmul, *_inputs(), reference=reference, compat=False,
                             checks=["reference"])
    assert "reference" in report.checks
    assert {flag for dtype, flag in seen if dtype == torch.float32} == {True}
    assert {flag for dtype, flag in seen if dtype == torch.float64} == {False}
    assert torch.backends.cuda.matmul.allow_tf32 is False  # restored


# -- per input (red team, issue 22): TF32's tolerance only where a TF32 operand is on the path ----
def _linear_bias(fx=1.0, fb=1.0):
    class LinearBias(Function):
        """y = x @ w + b with the product in TF32; x's gradient times fx, b's times fb."""

        @staticmethod
        def forward(ctx, x, w, b):
            ctx.save_for_backward(x, w)
            return (_mm(x.float(), w.float()) + b.float()).to(x.dtype)

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            x, w = ctx.saved_tensors
            g = g.float()
            return (fx * _mm(g, w.float().T)).to(x.dtype), _mm(x.float().T, g).to(w.dtype), \
                (fb * g.sum(0)).to(x.dtype)

    return LinearBias


def _linear_inputs(B, K, N):
    gen = torch.Generator().manual_seed(0)
    return [torch.randn(*shape, generator=gen).requires_grad_() for shape in ((B, K), (K, N), (N,))]


def _factors(fn, xs):
    """Per input, the least-squares factor between the Function's gradient and float64
    autograd's of x @ w + b, for one grad_output."""
    g = torch.randn(xs[0].shape[0], xs[1].shape[1], generator=torch.Generator().manual_seed(7))
    got = torch.autograd.grad(fn.apply(*xs), xs, g)
    x64 = [t.detach().double().requires_grad_() for t in xs]
    want = torch.autograd.grad(x64[0] @ x64[1] + x64[2], x64, g.double())
    return [float((a.double() * b).sum() / (b * b).sum()) for a, b in zip(got, want)]


@pytest.mark.parametrize("shape, fx, fb", [((4, 64, 8), 1.0, 1.05), ((8, 256, 8), 1.0, 1.1),
                                           ((4, 64, 8), 1.05, 1.0)])
def test_a_wrong_gradient_is_not_hidden_by_a_tf32_tolerance_it_does_not_need(natively, shape,
                                                                              fx, fb):
    # b's gradient (g.sum(0)) goes through no TF32 operand: float32's rtol; x's sums N=8
    # terms in backward, not the batch or K=64 of forward: x1.05 is outside TF32's rounding
    xs = _linear_inputs(*shape)
    assert _factors(_linear_bias(fx, fb), xs) == pytest.approx([fx, 1.0, fb], abs=4e-3)
    report = gradsmith.check(_linear_bias(fx, fb), *xs, compat=False, checks=["gradients"])
    wrong = "x" if fx != 1.0 else "b"
    assert {(f.code, f.input) for f in report.findings if f.is_error} == {
        ("gradient-mismatch", wrong)}, report


@pytest.mark.parametrize("shape", [(4, 64, 8), (8, 256, 8)])
def test_correct_linear_with_bias_passes_with_tf32_tolerances_per_input(natively, shape):
    xs = _linear_inputs(*shape)
    assert _factors(_linear_bias(), xs) == pytest.approx([1.0, 1.0, 1.0], abs=4e-3)
    report = gradsmith.check(_linear_bias(), *xs, compat=False, checks=["gradients"])
    assert report.passed, report
    (note,) = [f for f in report.findings if f.code == "low-precision-numerics"]
    widened = note.details["inputs"]
    assert set(widened) == {"x", "w"} and "b keep float32's rtol" in note.message
    # x's gradient sums over the output's 8 features; w's over the batch, bounded by them
    assert widened["x"]["reduction"] == 8 and widened["w"]["reduction"] == 8
    assert max(p["rtol"] for p in widened.values()) < 0.04


# -- natively on a CUDA GPU (skipped without one): a real tl.dot, and torch's TF32 matmuls --------
cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _kernel_mm(a, b):
    c = torch.empty(16, 16, device=a.device, dtype=torch.float32)
    _mm_default[(1,)](a.float().contiguous(), b.float().contiguous(), c, N=16)
    return c


class KernelMatmul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return _kernel_mm(a, b).to(a.dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return _kernel_mm(g, b.T).to(a.dtype), _kernel_mm(a.T, g).to(b.dtype)


class KernelMatmulUntransposed(KernelMatmul):
    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return _kernel_mm(g, b).to(a.dtype), _kernel_mm(a.T, g).to(b.dtype)


class TorchMatmul(Function):
    # float32 inside whatever it is given, as fused code does: the check is then in float32
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return (a.float() @ b.float()).to(a.dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        g = g.float()
        return (g @ b.float().T).to(a.dtype), (a.float().T @ g).to(b.dtype)


def _square_cuda():
    gen = torch.Generator().manual_seed(3)
    return tuple((8 * torch.randn(16, 16, generator=gen)).cuda().requires_grad_()
                 for _ in range(2))


@cuda
@pytest.mark.parametrize("fn, wrong", [(KernelMatmul, None), (KernelMatmulUntransposed, "a")])
def test_native_tl_dot_in_tf32(fn, wrong):
    report = gradsmith.check(fn, *_square_cuda(), compat=False, checks=["gradients"])
    assert any(f.details.get("computes_in") == "tf32" for f in report.findings), report
    bad = {(f.code, f.input) for f in report.findings if f.is_error}
    assert bad == (set() if wrong is None else {("gradient-mismatch", wrong)}), report


@cuda
def test_torch_matmul_under_allow_tf32(monkeypatch):
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", True)
    report = gradsmith.check(TorchMatmul, *_square_cuda(), compat=False, checks=["gradients"])
    assert report.passed, report
    (note,) = [f for f in report.findings if f.code == "low-precision-numerics"]
    assert note.details["computes_in"] == "tf32" and "allow_tf32" in note.message


@cuda
@pytest.mark.parametrize("fn, wrong", [(KernelMatmul, None), (KernelMatmulUntransposed, "a")])
def test_native_tl_dot_against_a_reference(fn, wrong):
    report = gradsmith.check(fn, *_square_cuda(), reference=lambda a, b: a @ b, compat=False,
                             checks=["reference"])
    bad = {(f.code, f.input) for f in report.findings if f.is_error}
    assert bad == (set() if wrong is None else {("reference-mismatch", wrong)}), report
