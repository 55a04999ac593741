"""Our own Triton kernels whose results depend on one input's layout, not the input's own.

``RmsNormUnitStrideWeight`` is ``kernels.RmsNorm`` (x made contiguous) whose host code passes
the weight to the kernel as it came: the kernel reads it with unit stride, so a non-contiguous
weight changes the output and the gradient of x, while a non-contiguous x changes nothing
(the fused-norm pattern: the cause is the weight, the gradient that changes is x's).
``RmsNormUnitStrideGrad`` hands grad_output to its backward kernel as it came (a transposed
one is read as if contiguous): the gradients of x and weight change, and the cause is
grad_output, no input. ``kernels.RmsNorm`` is the correct variant of both.
"""

from __future__ import annotations

import kernels as K
import torch
from torch.autograd.function import once_differentiable

import triton


class RmsNormUnitStrideWeight(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, eps=1e-6):
        shape = x.shape
        x2 = x.reshape(-1, shape[-1]).contiguous()
        rows, cols = x2.shape
        y = torch.empty_like(x2)
        rstd = torch.empty(rows, dtype=torch.float32, device=x2.device)
        K._rms_fwd[(rows,)](x2, weight, y, rstd, cols, eps, BLOCK=triton.next_power_of_2(cols))
        ctx.save_for_backward(x2, weight, rstd)
        return y.reshape(shape)

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        x2, weight, rstd = ctx.saved_tensors
        rows, cols = x2.shape
        dx = torch.empty_like(x2)
        dw = torch.empty(rows, cols, dtype=torch.float32, device=x2.device)
        K._rms_bwd[(rows,)](x2, weight, rstd, g.reshape(rows, cols).contiguous(), dx, dw, cols,
                            GOOD=True, BLOCK=triton.next_power_of_2(cols))
        return dx.reshape(g.shape), dw.sum(0).to(weight.dtype), None


class RmsNormUnitStrideGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, eps=1e-6):
        return K.RmsNorm.forward(ctx, x, weight, eps)

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        x2, weight, rstd = ctx.saved_tensors
        rows, cols = x2.shape
        dx = torch.empty_like(x2)
        dw = torch.empty(rows, cols, dtype=torch.float32, device=x2.device)
        K._rms_bwd[(rows,)](x2, weight, rstd, g.reshape(rows, cols), dx, dw, cols, GOOD=True,
                            BLOCK=triton.next_power_of_2(cols))
        return dx.reshape(g.shape), dw.sum(0).to(weight.dtype), None
