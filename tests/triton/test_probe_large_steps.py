"""A float32 Triton kernel with a pole near its inputs: probes must not trust far-away steps.

Reduced from a router's top-k weight tail (corpus 13, held-out): ``o = scale * w / (sum_k w)``
in a kernel that computes in float32, checked on float64 random inputs where a row sums to
-0.36. Float32's finite-difference step is 1e-2; the probe also tried steps x 100 and x 1000
(1 and 10), which move the row sum past its pole to where ``w / sum w`` is nearly constant:
both halved steps agreed, so their measured noise was tiny around an estimate of ~0, and a
correct backward FAILed gradient-mismatch (ratio -3000). A larger step is now taken only when
its estimate lies within the smaller step's measured band. Wrong backwards (the sum-to-one
term dropped, a wrong scale) still FAIL.
"""

import pytest
import torch
import triton.language as tl
from torch.autograd import Function
from torch.autograd.function import once_differentiable

import gradsmith
import triton


@triton.jit
def _norm_fwd(W, OUT, N, K: tl.constexpr, SCALE):
    row = tl.program_id(0)
    offs = tl.arange(0, K)
    w = tl.load(W + row * K + offs).to(tl.float32)
    s = tl.sum(w, axis=0)
    tl.store(OUT + row * K + offs, (w * (SCALE / s)).to(OUT.dtype.element_ty))


@triton.jit
def _norm_bwd(W, GO, GW, N, K: tl.constexpr, SCALE, DROP: tl.constexpr, FACTOR):
    row = tl.program_id(0)
    offs = tl.arange(0, K)
    w = tl.load(W + row * K + offs).to(tl.float32)
    go = tl.load(GO + row * K + offs).to(tl.float32)
    s = tl.sum(w, axis=0)
    gdot = tl.sum(go * (w / s), axis=0)
    if DROP:
        gdot = gdot * 0.0
    gw = (SCALE / s) * (go - gdot) * FACTOR
    tl.store(GW + row * K + offs, gw.to(GW.dtype.element_ty))


class SumNormalize(Function):
    """scale * w / w.sum(-1): float32 inside, the exact sum-to-one VJP."""

    drop, factor = False, 1.0

    @staticmethod
    def forward(ctx, w, scale):
        w = w.contiguous()
        o = torch.empty_like(w)
        _norm_fwd[(w.shape[0],)](w, o, w.shape[0], K=w.shape[1], SCALE=float(scale))
        ctx.save_for_backward(w)
        ctx.scale = float(scale)
        return o

    @classmethod
    @once_differentiable
    def backward(cls, ctx, go):
        (w,) = ctx.saved_tensors
        gw = torch.empty_like(w)
        _norm_bwd[(w.shape[0],)](w, go.contiguous(), gw, w.shape[0], K=w.shape[1],
                                 SCALE=ctx.scale, DROP=cls.drop, FACTOR=cls.factor)
        return gw, None


class DropsSumTerm(SumNormalize):
    drop = True  # the <go, p> term of the sum-to-one Jacobian left out


class WrongScale(SumNormalize):
    factor = 1.5


# one row sums to -0.36: steps of 1 and 10 cross its pole
W = [[1.5409961, -0.2934289, -2.1787894, 0.5684313],
     [-1.0845223, -1.3985954, 0.4033468, 0.8380263],
     [-0.7192576, -0.4033435, -0.5966354, 0.1820365]]


def _w():
    return torch.tensor(W, dtype=torch.float64).requires_grad_()


def test_reference_agrees():
    """The kernel's backward is the VJP of autograd's w / w.sum(-1) (float32 precision)."""
    w = _w()
    go = torch.randn(3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    (g,) = torch.autograd.grad(SumNormalize.apply(w, 2.0), w, go)
    (ref,) = torch.autograd.grad(2.0 * w / w.sum(-1, keepdim=True), w, go)
    torch.testing.assert_close(g, ref, rtol=1e-5, atol=1e-5)


def test_correct_kernel_passes():
    report = gradsmith.check(SumNormalize, _w(), 2.0, compat=False, checks=["gradients"])
    computes = [f for f in report.findings if f.code == "low-precision-numerics"]
    assert computes and computes[0].details["computes_in"] == "float32"
    assert report.passed, report


@pytest.mark.parametrize("fn", [DropsSumTerm, WrongScale])
def test_wrong_backward_fails(fn):
    report = gradsmith.check(fn, _w(), 2.0, compat=False, checks=["gradients"])
    assert not report.passed
    assert {(f.code, f.input) for f in report.findings if f.is_error} == {
        ("gradient-mismatch", "w")}
