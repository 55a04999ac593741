"""Our own Triton kernels whose input shapes only the code's own words state, correct and broken.

Modelled on what fused-kernel libraries do (no third-party code): host code that checks its
inputs, or not, and says the shapes it wants in words zero-config synthesis must read.

- ``HeadMix`` (``out[..., c] = sum_j h[..., j] * x[..., j, c]``): ``x`` is ``[..., HC, C]`` by
  an assert message in a helper, ``h`` is ``[..., HC]`` by its host code's ``view``, which
  checks nothing (forward runs on a guessed ``h`` of too many rows; backward then rejects it);
  ``HeadMixBadBackward`` forgets grad_output in ``h``'s gradient.
- ``SectionGain`` (``y[:, d] = x[:, d] * w[section of d]``): ``sections`` is a list of ints
  summing to the hidden size that the kernel reads by index, shapes in the docstring;
  ``SectionGainBadBackward`` sums ``w``'s gradient over the wrong columns.
- ``Coefficients`` (``alpha * x_flat @ phi`` as ``[..., HC, HC]``): shapes in comments on its
  parameters, ``HC * HC == M`` asserted, float32 only with the flag its message names;
  ``CoefficientsBadBackward`` forgets ``alpha`` in ``phi``'s gradient.

Each has a plain-PyTorch ``*_reference`` of the same inputs. Every backward that runs a
kernel is ``@once_differentiable``. Values the name tables get wrong: ``named_kernels``.
"""

from __future__ import annotations

import torch
import triton.language as tl
from torch.autograd.function import once_differentiable

import triton


# -- [..., HC, C]: mixing heads by per-token coefficients --------------------------------------
@triton.jit
def _mix_fwd(x_ptr, h_ptr, out_ptr, HC, C, BHC: tl.constexpr, BC: tl.constexpr):
    n = tl.program_id(0)
    j = tl.arange(0, BHC)
    c = tl.arange(0, BC)
    mask = (j[:, None] < HC) & (c[None, :] < C)
    x = tl.load(x_ptr + n * HC * C + j[:, None] * C + c[None, :], mask=mask, other=0.0)
    h = tl.load(h_ptr + n * HC + j, mask=j < HC, other=0.0)
    out = tl.sum(x.to(tl.float32) * h.to(tl.float32)[:, None], axis=0)
    tl.store(out_ptr + n * C + c, out.to(out_ptr.dtype.element_ty), mask=c < C)


@triton.jit
def _mix_bwd(x_ptr, h_ptr, g_ptr, dx_ptr, dh_ptr, HC, C, GOOD: tl.constexpr,
             BHC: tl.constexpr, BC: tl.constexpr):
    n = tl.program_id(0)
    j = tl.arange(0, BHC)
    c = tl.arange(0, BC)
    mask = (j[:, None] < HC) & (c[None, :] < C)
    x = tl.load(x_ptr + n * HC * C + j[:, None] * C + c[None, :], mask=mask, other=0.0)
    h = tl.load(h_ptr + n * HC + j, mask=j < HC, other=0.0).to(tl.float32)
    g = tl.load(g_ptr + n * C + c, mask=c < C, other=0.0).to(tl.float32)
    dx = h[:, None] * g[None, :]
    if GOOD:
        dh = tl.sum(x.to(tl.float32) * g[None, :], axis=1)
    else:
        dh = tl.sum(x.to(tl.float32), axis=1)
    tl.store(dx_ptr + n * HC * C + j[:, None] * C + c[None, :],
             dx.to(dx_ptr.dtype.element_ty), mask=mask)
    tl.store(dh_ptr + n * HC + j, dh.to(dh_ptr.dtype.element_ty), mask=j < HC)


def _tokens(x):
    assert x.dim() >= 3, "x must be [..., HC, C]"
    return x.contiguous().view(-1, x.shape[-2], x.shape[-1])


class HeadMix(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, h):
        x_flat = _tokens(x)
        N, HC, C = x_flat.shape
        h_flat = h.contiguous().view(-1, HC)  # no check: the kernel reads the first N rows
        out = torch.empty((N, C), dtype=x.dtype, device=x.device)
        _mix_fwd[(N,)](x_flat, h_flat, out, HC, C, BHC=triton.next_power_of_2(HC),
                       BC=triton.next_power_of_2(C))
        ctx.save_for_backward(x_flat, h_flat)
        ctx.shape = x.shape
        return out.view(*x.shape[:-2], C)

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        return _mix_backward(ctx, g, True)


class HeadMixBadBackward(HeadMix):
    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        return _mix_backward(ctx, g, False)


def _mix_backward(ctx, g, good):
    x_flat, h_flat = ctx.saved_tensors
    N, HC, C = x_flat.shape
    dx, dh = torch.empty_like(x_flat), torch.empty_like(h_flat)
    _mix_bwd[(N,)](x_flat, h_flat, g.contiguous().view(-1, C), dx, dh, HC, C, GOOD=good,
                   BHC=triton.next_power_of_2(HC), BC=triton.next_power_of_2(C))
    return dx.view(ctx.shape), dh.view(ctx.shape[:-1])


def head_mix_reference(x, h):
    return (h.unsqueeze(-1) * x).sum(-2)


# -- sections: a list of ints summing to the hidden size, read by index -----------------------
@triton.jit
def _sec_fwd(x_ptr, w_ptr, y_ptr, D, s0, s1, BD: tl.constexpr):
    r = tl.program_id(0)
    d = tl.arange(0, BD)
    sec = tl.where(d < s0, 0, tl.where(d < s0 + s1, 1, 2))
    x = tl.load(x_ptr + r * D + d, mask=d < D, other=0.0)
    w = tl.load(w_ptr + sec, mask=d < D, other=0.0)
    tl.store(y_ptr + r * D + d, x * w, mask=d < D)


@triton.jit
def _sec_bwd(x_ptr, w_ptr, g_ptr, dx_ptr, dw_ptr, D, s0, s1, GOOD: tl.constexpr,
             BD: tl.constexpr):
    r = tl.program_id(0)
    d = tl.arange(0, BD)
    end1 = s0 + s1 if GOOD else s1
    sec = tl.where(d < s0, 0, tl.where(d < end1, 1, 2))
    x = tl.load(x_ptr + r * D + d, mask=d < D, other=0.0)
    g = tl.load(g_ptr + r * D + d, mask=d < D, other=0.0)
    w = tl.load(w_ptr + sec, mask=d < D, other=0.0)
    tl.store(dx_ptr + r * D + d, g * w, mask=d < D)
    for k in tl.static_range(3):
        tl.store(dw_ptr + r * 3 + k, tl.sum(tl.where((sec == k) & (d < D), g * x, 0.0), axis=0))


class SectionGain(torch.autograd.Function):
    """Scales each section of the hidden dimension by its own gain.

    x size: (rows, dim)
    w size: (3,)
    sections: three ints summing to dim
    """

    @staticmethod
    def forward(ctx, x, w, sections):
        x = x.contiguous()
        y = torch.empty_like(x)
        D = x.shape[-1]
        _sec_fwd[(x.shape[0],)](x, w, y, D, sections[0], sections[1],
                                BD=triton.next_power_of_2(D))
        ctx.save_for_backward(x, w)
        ctx.sections = sections
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        return _section_backward(ctx, g, True)


class SectionGainBadBackward(SectionGain):
    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        return _section_backward(ctx, g, False)


def _section_backward(ctx, g, good):
    x, w = ctx.saved_tensors
    D = x.shape[-1]
    dx, dw = torch.empty_like(x), torch.empty((x.shape[0], 3), dtype=x.dtype, device=x.device)
    _sec_bwd[(x.shape[0],)](x, w, g.contiguous(), dx, dw, D, ctx.sections[0],
                            ctx.sections[1], GOOD=good, BD=triton.next_power_of_2(D))
    return dx, dw.sum(0), None


def section_gain_reference(x, w, sections):
    return x * torch.cat([w[i].expand(n) for i, n in enumerate(sections)])


# -- shapes in parameter comments, an equality between dimensions, a flag the message names ----
@triton.jit
def _coef_fwd(x_ptr, phi_ptr, out_ptr, K, M, alpha, BK: tl.constexpr, BM: tl.constexpr):
    n = tl.program_id(0)
    k = tl.arange(0, BK)
    m = tl.arange(0, BM)
    x = tl.load(x_ptr + n * K + k, mask=k < K, other=0.0)
    phi = tl.load(phi_ptr + k[:, None] * M + m[None, :], mask=(k[:, None] < K) & (m[None, :] < M),
                  other=0.0)
    out = tl.sum(x[:, None] * phi, axis=0) * alpha
    tl.store(out_ptr + n * M + m, out, mask=m < M)


class Coefficients(torch.autograd.Function):
    @staticmethod
    def forward(ctx,
                x,  # [..., HC, C] bf16/fp16 (fp32 with allow_fp32)
                phi,  # [HC*C, M]
                alpha: float,
                allow_fp32: bool):
        if not allow_fp32:
            assert x.dtype in (torch.float16, torch.bfloat16), \
                "x should be BF16/FP16 (set allow_fp32=True for FP32)"
        assert x.dtype != torch.float64, "x must not be float64"
        HC, C = x.shape[-2], x.shape[-1]
        M = phi.shape[1]
        assert HC * HC == M, "phi must have HC * HC columns"
        flat = x.contiguous().view(-1, HC * C)
        out = torch.empty((flat.shape[0], M), dtype=torch.float32, device=x.device)
        _coef_fwd[(flat.shape[0],)](flat, phi.contiguous(), out, HC * C, M, alpha,
                                    BK=triton.next_power_of_2(HC * C),
                                    BM=triton.next_power_of_2(M))
        ctx.save_for_backward(flat, phi)
        ctx.alpha, ctx.shape = alpha, x.shape
        return out.view(*x.shape[:-2], HC, HC)

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        return _coefficients_backward(ctx, g, True)


class CoefficientsBadBackward(Coefficients):
    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        return _coefficients_backward(ctx, g, False)


def _coefficients_backward(ctx, g, good):
    flat, phi = ctx.saved_tensors
    g = g.reshape(flat.shape[0], -1).to(flat.dtype) * ctx.alpha
    dphi = flat.T @ g if good else flat.T @ g / ctx.alpha  # broken: forgets alpha
    return (g @ phi.T).view(ctx.shape), dphi, None, None


def coefficients_reference(x, phi, alpha, allow_fp32):
    HC = x.shape[-2]
    return ((x.reshape(-1, x.shape[-2] * x.shape[-1]) @ phi) * alpha).view(
        *x.shape[:-2], HC, HC)
