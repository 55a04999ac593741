"""Our own Triton kernels reading a tensor of per-row integer codes, correct and broken.

Modelled on fused-activation kernels of mixture-of-experts libraries (no third-party code): the
kernel loads one code per row (``at = tl.load(codes_ptr + row * s_code)``) and picks the
activation with
``tl.where(at == 1, ...)``. Forward and backward each end their chain of ``where`` in a
different default branch, which no valid code reaches; random float codes reach both, so the
two disagree there and a correct Function looks wrong.

- ``RowCoded``: code 0 the identity, 1 ``x**2 / 2``, 2 ``sin``; correct for every code.
- ``RowCodedBadSine``: code 2's derivative is ``-cos`` (and only it).
"""

from __future__ import annotations

import torch
import triton.language as tl
from torch.autograd.function import once_differentiable

import triton


@triton.jit
def _row_coded_fwd(x_ptr, codes_ptr, y_ptr, n, s_code, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n + offs, mask=offs < n, other=0.0).to(tl.float32)
    at = tl.load(codes_ptr + row * s_code)
    y = tl.where(at == 0, x, tl.where(at == 1, 0.5 * x * x, tl.sin(x)))
    tl.store(y_ptr + row * n + offs, y.to(y_ptr.dtype.element_ty), mask=offs < n)


@triton.jit
def _row_coded_bwd(x_ptr, codes_ptr, g_ptr, dx_ptr, n, s_code, SIGN: tl.constexpr,
                   BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n + offs, mask=offs < n, other=0.0).to(tl.float32)
    g = tl.load(g_ptr + row * n + offs, mask=offs < n, other=0.0).to(tl.float32)
    at = tl.load(codes_ptr + row * s_code)[None]
    d = tl.where(at == 0, 1.0, tl.where(at == 2, SIGN * tl.cos(x), x))
    tl.store(dx_ptr + row * n + offs, (g * d).to(dx_ptr.dtype.element_ty), mask=offs < n)


class RowCoded(torch.autograd.Function):
    SIGN = 1.0

    @staticmethod
    def forward(ctx, x, row_codes):
        x = x.contiguous()
        rows, n = x.shape
        y = torch.empty_like(x)
        _row_coded_fwd[(rows,)](x, row_codes, y, n, row_codes.stride(0), BLOCK=triton.next_power_of_2(n))
        ctx.save_for_backward(x, row_codes)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        x, row_codes = ctx.saved_tensors
        rows, n = x.shape
        dx = torch.empty_like(x)
        _row_coded_bwd[(rows,)](x, row_codes, g.contiguous(), dx, n, row_codes.stride(0),
                                SIGN=ctx._forward_cls.SIGN, BLOCK=triton.next_power_of_2(n))
        return dx, None


class RowCodedBadSine(RowCoded):
    SIGN = -1.0


def row_coded_reference(x, row_codes):
    forms = [lambda t: t, lambda t: 0.5 * t * t, torch.sin]
    return torch.stack([forms[int(c)](r) for r, c in zip(x, row_codes)])
