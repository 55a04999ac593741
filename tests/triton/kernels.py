"""Our own Triton kernels in the shapes fused-kernel libraries use, each correct and broken.

Imported only under Triton's interpreter (``TRITON_INTERPRET=1`` set and the shims applied
before this module loads, as ``gradsmith check`` does). Like the libraries they model, every
kernel computes in float32 whatever it is given and stores in the input's dtype.

- ``Gelu`` (elementwise, tanh approximation through ``libdevice.tanh``, a float scalar argument
  read with ``.to``): ``GeluBadBackward`` drops the tanh' term.
- ``RmsNorm`` (row-wise normalisation saving its per-row statistic, ``@triton.autotune``d
  forward): ``RmsNormBadBackward`` drops the term through the statistic.
- ``CrossEntropy`` (a fused loss writing its gradient in forward; backward scales that saved
  buffer *in place* by grad_output, legitimately, to save memory): ``CrossEntropyNoScale``
  ignores grad_output.

Each has a plain-PyTorch ``*_reference`` of the same inputs. ``GeluTwice`` is ``Gelu`` whose
backward is not ``@once_differentiable`` although it runs a kernel: its second derivative is
silently wrong.
"""

from __future__ import annotations

import math

import torch
import triton.language as tl
from torch.autograd.function import once_differentiable
from triton.language.extra.libdevice import rsqrt, tanh

import triton

BLOCK = 64
_C = math.sqrt(2 / math.pi)


# -- elementwise: tanh-GELU ------------------------------------------------------------------
@triton.jit
def _gelu_fwd(x_ptr, y_ptr, n, c, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    inner = c.to(tl.float32) * (x + 0.044715 * x * x * x)
    y = 0.5 * x * (1 + tanh(inner))
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _gelu_bwd(x_ptr, g_ptr, dx_ptr, n, c, GOOD: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    g = tl.load(g_ptr + offs, mask=mask).to(tl.float32)
    c32 = c.to(tl.float32)
    t = tanh(c32 * (x + 0.044715 * x * x * x))
    d = 0.5 * (1 + t)
    if GOOD:
        d += 0.5 * x * (1 - t * t) * c32 * (1 + 3 * 0.044715 * x * x)
    tl.store(dx_ptr + offs, (g * d).to(dx_ptr.dtype.element_ty), mask=mask)


def _gelu_forward(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    _gelu_fwd[(triton.cdiv(x.numel(), BLOCK),)](x, y, x.numel(), _C, BLOCK=BLOCK)
    return y


def _gelu_backward(x, g, good):
    g = g.contiguous()
    dx = torch.empty_like(x)
    _gelu_bwd[(triton.cdiv(x.numel(), BLOCK),)](x, g, dx, x.numel(), _C, GOOD=good,
                                                BLOCK=BLOCK)
    return dx


class Gelu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x = x.contiguous()  # the kernels index flat memory
        ctx.save_for_backward(x)
        return _gelu_forward(x)

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return _gelu_backward(x, g, True)


class GeluBadBackward(Gelu):
    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return _gelu_backward(x, g, False)


class GeluTwice(Gelu):
    """Right first derivative; the kernel's output has no graph, so double backward is 0."""

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return _gelu_backward(x, g, True)


def gelu_reference(x):
    return 0.5 * x * (1 + torch.tanh(_C * (x + 0.044715 * x ** 3)))


# -- row-wise normalisation with a saved statistic: RMSNorm -----------------------------------
@triton.autotune(configs=[triton.Config({}, num_warps=4), triton.Config({}, num_warps=8)],
                 key=["n_cols"])
@triton.jit
def _rms_fwd(x_ptr, w_ptr, y_ptr, rstd_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0).to(tl.float32)
    r = rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    tl.store(rstd_ptr + row, r)
    tl.store(y_ptr + row * n_cols + cols, (x * r * w).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _rms_bwd(x_ptr, w_ptr, rstd_ptr, g_ptr, dx_ptr, dw_ptr, n_cols, GOOD: tl.constexpr,
             BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0).to(tl.float32)
    g = tl.load(g_ptr + row * n_cols + cols, mask=mask, other=0).to(tl.float32)
    r = tl.load(rstd_ptr + row)
    gw = g * w
    dx = r * gw
    if GOOD:
        dx -= r * r * r * x * tl.sum(gw * x, axis=0) / n_cols
    tl.store(dx_ptr + row * n_cols + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
    tl.store(dw_ptr + row * n_cols + cols, g * x * r, mask=mask)  # per-row partials


class RmsNorm(torch.autograd.Function):
    GOOD = True

    @staticmethod
    def forward(ctx, x, weight, eps=1e-6):
        shape = x.shape
        x2 = x.reshape(-1, shape[-1]).contiguous()
        weight = weight.contiguous()
        rows, cols = x2.shape
        y = torch.empty_like(x2)
        rstd = torch.empty(rows, dtype=torch.float32, device=x2.device)
        _rms_fwd[(rows,)](x2, weight, y, rstd, cols, eps, BLOCK=triton.next_power_of_2(cols))
        ctx.save_for_backward(x2, weight, rstd)
        return y.reshape(shape)

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        x2, weight, rstd = ctx.saved_tensors
        rows, cols = x2.shape
        g2 = g.reshape(rows, cols).contiguous()
        dx = torch.empty_like(x2)
        dw = torch.empty(rows, cols, dtype=torch.float32, device=x2.device)
        good = ctx._forward_cls.GOOD
        _rms_bwd[(rows,)](x2, weight, rstd, g2, dx, dw, cols, GOOD=good,
                          BLOCK=triton.next_power_of_2(cols))
        return dx.reshape(g.shape), dw.sum(0).to(weight.dtype), None


class RmsNormBadBackward(RmsNorm):
    GOOD = False


def rms_norm_reference(x, weight, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


# -- fused loss writing its gradient in forward: cross-entropy ---------------------------------
@triton.jit
def _ce_fwd(logits_ptr, target_ptr, loss_ptr, grad_ptr, n_cols, inv_rows, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    z = tl.load(logits_ptr + row * n_cols + cols, mask=mask, other=-float("inf")).to(tl.float32)
    t = tl.load(target_ptr + row)
    m = tl.max(z, axis=0)
    e = tl.exp(z - m)
    s = tl.sum(e, axis=0)
    zt = tl.load(logits_ptr + row * n_cols + t).to(tl.float32)  # the target as an offset
    tl.store(loss_ptr + row, (tl.log(s) + m - zt) * inv_rows)
    p = e / s - tl.where(cols == t, 1.0, 0.0)
    tl.store(grad_ptr + row * n_cols + cols, (p * inv_rows).to(grad_ptr.dtype.element_ty),
             mask=mask)


class CrossEntropy(torch.autograd.Function):
    SCALE = True

    @staticmethod
    def forward(ctx, logits, target):
        rows, cols = logits.shape
        logits = logits.contiguous()
        loss = torch.empty(rows, dtype=torch.float32, device=logits.device)
        grad = torch.empty_like(logits)
        _ce_fwd[(rows,)](logits, target, loss, grad, cols, 1.0 / rows,
                         BLOCK=triton.next_power_of_2(cols))
        ctx.save_for_backward(grad)
        return loss.sum().to(logits.dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        (grad,) = ctx.saved_tensors
        if ctx._forward_cls.SCALE:
            grad.mul_(g)  # in place into the saved buffer: the memory trick fused losses use
        return grad, None


class CrossEntropyNoScale(CrossEntropy):
    SCALE = False


def cross_entropy_reference(logits, target):
    return torch.nn.functional.cross_entropy(logits, target)
