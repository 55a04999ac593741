"""Our own Triton kernels whose non-shape arguments the name tables get wrong, correct and broken.

- ``Modulated`` (an RMS norm modulated by ``(1 + scale)``): ``scale`` is a tensor whose
  element count must be a multiple of the hidden size, although the name tables take
  ``scale`` for a number; ``eps`` is a float the kernel reads; float64 is refused by its
  backward's dtype table, as in the libraries; ``ModulatedBadBackward`` drops the term
  through the row statistic.
- ``Activation``: a mode string its docstring lists (``Options are 'softsign' and 'sigmoid'``);
  ``ActivationBadBackward`` gets softsign's derivative wrong.

Each has a plain-PyTorch ``*_reference`` of the same inputs. Every backward that runs a
kernel is ``@once_differentiable``.
"""

from __future__ import annotations

import torch
import triton.language as tl
from torch.autograd.function import once_differentiable

import triton

# -- a modulated RMS norm: ``scale`` is a tensor, not the number its name suggests -------------
_TL = {torch.float32: tl.float32, torch.float16: tl.float16, torch.bfloat16: tl.bfloat16}


@triton.jit
def _mod_fwd(x_ptr, s_ptr, y_ptr, rstd_ptr, H, per, eps, BH: tl.constexpr):
    r = tl.program_id(0)
    d = tl.arange(0, BH)
    x = tl.load(x_ptr + r * H + d, mask=d < H, other=0.0).to(tl.float32)
    s = tl.load(s_ptr + (r // per) * H + d, mask=d < H, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / H + eps)
    tl.store(y_ptr + r * H + d, (x * rstd * (1 + s)).to(y_ptr.dtype.element_ty), mask=d < H)
    tl.store(rstd_ptr + r, rstd)


@triton.jit
def _mod_bwd(x_ptr, s_ptr, g_ptr, rstd_ptr, dx_ptr, ds_ptr, H, per, OUT: tl.constexpr,
             GOOD: tl.constexpr, BH: tl.constexpr):
    r = tl.program_id(0)
    d = tl.arange(0, BH)
    x = tl.load(x_ptr + r * H + d, mask=d < H, other=0.0).to(tl.float32)
    s = tl.load(s_ptr + (r // per) * H + d, mask=d < H, other=0.0).to(tl.float32)
    g = tl.load(g_ptr + r * H + d, mask=d < H, other=0.0).to(tl.float32)
    rstd = tl.load(rstd_ptr + r)
    xhat = x * rstd
    gs = g * (1 + s)
    dx = rstd * gs
    if GOOD:
        dx -= rstd * xhat * tl.sum(gs * xhat, axis=0) / H
    tl.store(dx_ptr + r * H + d, dx.to(OUT), mask=d < H)
    tl.store(ds_ptr + r * H + d, g * xhat, mask=d < H)


def _modulation_rows(X, scale):
    dim = X.shape[-1]
    assert scale.numel() % dim == 0, "scale element count must be a multiple of the hidden size"
    rows, scale_rows = X.numel() // dim, scale.numel() // dim
    assert rows % scale_rows == 0, "scale rows must divide the rows of X"
    return scale_rows, rows // scale_rows


class Modulated(torch.autograd.Function):
    @staticmethod
    def forward(ctx, X, scale, eps):
        scale_rows, per = _modulation_rows(X, scale)
        H = X.shape[-1]
        x, s = X.contiguous().view(-1, H), scale.contiguous().view(scale_rows, H)
        y, rstd = torch.empty_like(x), torch.empty(x.shape[0], dtype=torch.float32, device=x.device)
        _mod_fwd[(x.shape[0],)](x, s, y, rstd, H, per, eps, BH=triton.next_power_of_2(H))
        ctx.save_for_backward(x, s, rstd)
        ctx.per, ctx.shape, ctx.scale_shape = per, X.shape, scale.shape
        return y.view(X.shape)

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        return _modulated_backward(ctx, g, True)


class ModulatedBadBackward(Modulated):
    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        return _modulated_backward(ctx, g, False)


def _modulated_backward(ctx, g, good):
    x, s, rstd = ctx.saved_tensors
    H = x.shape[1]
    dx, ds = torch.empty_like(x), torch.empty(x.shape, dtype=torch.float32, device=x.device)
    _mod_bwd[(x.shape[0],)](x, s, g.contiguous().view(-1, H), rstd, dx, ds, H, ctx.per,
                            OUT=_TL[x.dtype], GOOD=good, BH=triton.next_power_of_2(H))
    dscale = ds.view(s.shape[0], ctx.per, H).sum(1).to(s.dtype)
    return dx.view(ctx.shape), dscale.view(ctx.scale_shape), None


def modulated_reference(X, scale, eps):
    H = X.shape[-1]
    x = X.reshape(-1, H)
    s = scale.reshape(-1, H).repeat_interleave(x.shape[0] // (scale.numel() // H), 0)
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * (1 + s)
    return y.view(X.shape)


# -- a mode named by a string its docstring lists ----------------------------------------------
@triton.jit
def _act_fwd(x_ptr, y_ptr, n, ACT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n).to(tl.float32)
    if ACT == "softsign":
        y = x / (1 + tl.abs(x))
    else:
        y = tl.sigmoid(x)
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=offs < n)


@triton.jit
def _act_bwd(x_ptr, g_ptr, dx_ptr, n, ACT: tl.constexpr, GOOD: tl.constexpr,
             BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n).to(tl.float32)
    g = tl.load(g_ptr + offs, mask=offs < n).to(tl.float32)
    if ACT == "softsign":
        d = 1 / ((1 + tl.abs(x)) * (1 + tl.abs(x))) if GOOD else 1 / (1 + tl.abs(x))
    else:
        d = tl.sigmoid(x) * (1 - tl.sigmoid(x))
    tl.store(dx_ptr + offs, (g * d).to(dx_ptr.dtype.element_ty), mask=offs < n)


class Activation(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, act: str):
        """Applies an activation.

        Args:
            ctx: the context.
            x: the input, any shape.
            act: the activation's name. Options are 'softsign' and 'sigmoid'.
        """
        x = x.contiguous()
        y = torch.empty_like(x)
        _act_fwd[(triton.cdiv(x.numel(), 64),)](x, y, x.numel(), ACT=act, BLOCK=64)
        ctx.save_for_backward(x)
        ctx.act = act
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        return _act_backward(ctx, g, True)


class ActivationBadBackward(Activation):
    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        return _act_backward(ctx, g, False)


def _act_backward(ctx, g, good):
    (x,) = ctx.saved_tensors
    dx = torch.empty_like(x)
    _act_bwd[(triton.cdiv(x.numel(), 64),)](x, g.contiguous(), dx, x.numel(), ACT=ctx.act,
                                            GOOD=good, BLOCK=64)
    return dx, None


def activation_reference(x, act):
    return torch.nn.functional.softsign(x) if act == "softsign" else torch.sigmoid(x)
