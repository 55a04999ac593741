"""Our own Triton kernel reading a per-row flag it tests against one literal, correct and
broken (no third-party code): ``if tl.load(mask_ptr + row * s_mask) == 0: store 0; return`` skips
masked rows (RL losses over padded tokens). Codes drawn from the single literal masked every
row: the loss was 0 everywhere and nothing was checked.

- ``RowMasked``: ``x**2 / 2`` on kept rows, 0 on masked ones; correct.
- ``RowMaskedDouble``: backward gives kept rows ``2 * g * x``.
"""

from __future__ import annotations

import torch
import triton.language as tl
from torch.autograd.function import once_differentiable

import triton


@triton.jit
def _row_masked(x_ptr, mask_ptr, s_mask, g_ptr, y_ptr, n, SCALE: tl.constexpr, GRAD: tl.constexpr,
                BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    keep = tl.load(mask_ptr + row * s_mask)
    if keep == 0:
        tl.store(y_ptr + row * n + offs, tl.zeros([BLOCK], dtype=tl.float32).to(
            y_ptr.dtype.element_ty), mask=offs < n)
        return
    x = tl.load(x_ptr + row * n + offs, mask=offs < n, other=0.0).to(tl.float32)
    if GRAD:
        g = tl.load(g_ptr + row * n + offs, mask=offs < n, other=0.0).to(tl.float32)
        y = SCALE * g * x
    else:
        y = 0.5 * x * x
    tl.store(y_ptr + row * n + offs, y.to(y_ptr.dtype.element_ty), mask=offs < n)


class RowMasked(torch.autograd.Function):
    SCALE = 1.0

    @staticmethod
    def forward(ctx, x, row_mask):
        x = x.contiguous()
        rows, n = x.shape
        y = torch.empty_like(x)
        _row_masked[(rows,)](x, row_mask, row_mask.stride(0), x, y, n, SCALE=1.0, GRAD=False,
                             BLOCK=triton.next_power_of_2(n))
        ctx.save_for_backward(x, row_mask)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        x, row_mask = ctx.saved_tensors
        rows, n = x.shape
        dx = torch.empty_like(x)
        _row_masked[(rows,)](x, row_mask, row_mask.stride(0), g.contiguous(), dx, n, SCALE=ctx._forward_cls.SCALE,
                             GRAD=True, BLOCK=triton.next_power_of_2(n))
        return dx, None


class RowMaskedDouble(RowMasked):
    SCALE = 2.0


def row_masked_reference(x, row_mask):
    return 0.5 * x * x * (row_mask != 0).to(x.dtype)[:, None]
