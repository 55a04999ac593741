"""Our own Triton kernels whose arguments only the kernels' bodies explain, correct and broken.

Modelled on what fused-kernel libraries do (no third-party code); zero-config synthesis has to
read the kernels to build valid inputs:

- ``PickedLoss`` (a cross-entropy that writes its gradient in forward): the kernel loads
  ``picks`` and compares it with column offsets, so ``picks`` is a class index; with float
  values no class matches and the kernel computes another function (logsumexp minus the row
  max) whose stored gradient is then wrong. ``PickedLossNoOneHot`` forgets the one-hot term.
- ``HalfRotate`` (a rotary embedding: rotates the two halves of the last dimension by angles
  ``(j + 1) / 2``): the kernel handles ``D // 2`` columns twice, so an odd last dimension
  leaves the last output column unwritten. ``HalfRotateSameWay`` rotates the gradient forward
  instead of back.
- ``Coded`` (an activation chosen by an int code the kernel compares with 0, 1 and 2: SiLU,
  ``x**2 / 2``, softplus): ``CodedBadSquare`` gets code 1's derivative wrong (and only it).

Each has a plain-PyTorch ``*_reference`` of the same inputs; every backward that runs a kernel
is ``@once_differentiable``.
"""

from __future__ import annotations

import torch
import triton.language as tl
from torch.autograd.function import once_differentiable

import triton


# -- a class index the kernel compares with column offsets --------------------------------------
@triton.jit
def _picked_fwd(z_ptr, picks_ptr, loss_ptr, grad_ptr, n_cols, ONE_HOT: tl.constexpr,
                BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    z = tl.load(z_ptr + row * n_cols + cols, mask=mask, other=-float("inf")).to(tl.float32)
    c = tl.load(picks_ptr + row)
    z = z - tl.max(z, axis=0)
    e = tl.exp(z)
    s = tl.sum(e, axis=0)
    picked = tl.sum(tl.where(cols == c, z, 0.0), axis=0)
    tl.store(loss_ptr + row, tl.log(s) - picked)
    p = e / s
    if ONE_HOT:
        p = p - tl.where(cols == c, 1.0, 0.0)
    tl.store(grad_ptr + row * n_cols + cols, p.to(grad_ptr.dtype.element_ty), mask=mask)


class PickedLoss(torch.autograd.Function):
    ONE_HOT = True

    @staticmethod
    def forward(ctx, logits, picks):
        rows, cols = logits.shape
        logits = logits.contiguous()
        loss = torch.empty(rows, dtype=torch.float32, device=logits.device)
        grad = torch.empty_like(logits)
        _picked_fwd[(rows,)](logits, picks, loss, grad, cols, ONE_HOT=ctx._forward_cls.ONE_HOT,
                             BLOCK=triton.next_power_of_2(cols))
        ctx.save_for_backward(grad)
        return loss.sum().to(logits.dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        (grad,) = ctx.saved_tensors
        return grad * g, None


class PickedLossNoOneHot(PickedLoss):
    ONE_HOT = False


class PickedLossInline(PickedLoss):
    """``PickedLoss`` handing the kernel ``picks.view(-1)``, an expression, not a name."""

    @staticmethod
    def forward(ctx, logits, picks):
        rows, cols = logits.shape
        logits = logits.contiguous()
        loss = torch.empty(rows, dtype=torch.float32, device=logits.device)
        grad = torch.empty_like(logits)
        _picked_fwd[(rows,)](logits, picks.view(-1), loss, grad, cols, ONE_HOT=True,
                             BLOCK=triton.next_power_of_2(cols))
        ctx.save_for_backward(grad)
        return loss.sum().to(logits.dtype)


def picked_loss_reference(logits, picks):
    return torch.nn.functional.cross_entropy(logits, picks.long(), reduction="sum")


# -- halves of the last dimension -----------------------------------------------------------
@triton.jit
def _rotate(x_ptr, out_ptr, D, SIGN: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    half = D // 2
    j = tl.arange(0, BLOCK)
    mask = j < half
    a = tl.load(x_ptr + row * D + j, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(x_ptr + row * D + half + j, mask=mask, other=0.0).to(tl.float32)
    angle = (j + 1).to(tl.float32) * 0.5
    c = tl.cos(angle)
    s = tl.sin(angle) * SIGN
    tl.store(out_ptr + row * D + j, (a * c - b * s).to(out_ptr.dtype.element_ty), mask=mask)
    tl.store(out_ptr + row * D + half + j, (a * s + b * c).to(out_ptr.dtype.element_ty),
             mask=mask)


def _rotated(x, sign):
    x2 = x.contiguous().view(-1, x.shape[-1])
    out = torch.empty_like(x2)
    _rotate[(x2.shape[0],)](x2, out, x2.shape[-1], SIGN=sign,
                            BLOCK=triton.next_power_of_2(max(x2.shape[-1] // 2, 1)))
    return out.view(x.shape)


class HalfRotate(torch.autograd.Function):
    BACK = -1.0

    @staticmethod
    def forward(ctx, x):
        return _rotated(x, 1.0)

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        return _rotated(g, ctx._forward_cls.BACK)


class HalfRotateSameWay(HalfRotate):
    BACK = 1.0


def half_rotate_reference(x):
    h = x.shape[-1] // 2
    angle = torch.arange(1, h + 1, dtype=x.dtype) * 0.5
    a, b = x[..., :h], x[..., h:2 * h]
    return torch.cat([a * angle.cos() - b * angle.sin(), a * angle.sin() + b * angle.cos()], -1)


# -- an int code the kernel compares with literals ------------------------------------------
@triton.jit
def _coded_fwd(x_ptr, y_ptr, n, FORM: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
    if FORM == 0:
        y = x / (1 + tl.exp(-x))
    elif FORM == 1:
        y = 0.5 * x * x
    else:
        y = tl.log(1 + tl.exp(x))
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=offs < n)


@triton.jit
def _coded_bwd(x_ptr, g_ptr, dx_ptr, n, FORM: tl.constexpr, GOOD: tl.constexpr,
               BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
    g = tl.load(g_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
    sig = 1 / (1 + tl.exp(-x))
    if FORM == 0:
        d = sig * (1 + x * (1 - sig))
    elif FORM == 1:
        d = x if GOOD else 0.5 * x
    else:
        d = sig
    tl.store(dx_ptr + offs, (g * d).to(dx_ptr.dtype.element_ty), mask=offs < n)


class Coded(torch.autograd.Function):
    GOOD = True

    @staticmethod
    def forward(ctx, x, form):
        x = x.contiguous()
        y = torch.empty_like(x)
        _coded_fwd[(triton.cdiv(x.numel(), 64),)](x, y, x.numel(), FORM=form, BLOCK=64)
        ctx.save_for_backward(x)
        ctx.form = form
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        dx = torch.empty_like(x)
        _coded_bwd[(triton.cdiv(x.numel(), 64),)](x, g.contiguous(), dx, x.numel(),
                                                   FORM=ctx.form, GOOD=ctx._forward_cls.GOOD,
                                                   BLOCK=64)
        return dx, None


class CodedBadSquare(Coded):
    GOOD = False


def coded_reference(x, form):
    return [torch.nn.functional.silu, lambda t: 0.5 * t * t,
            torch.nn.functional.softplus][form](x)


# -- a float with a shortcut the kernel takes at 1 ----------------------------------------------
@triton.jit
def _scaled_fwd(x_ptr, y_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    if alpha == 1:
        y = x
    else:
        y = x * alpha
    tl.store(y_ptr + offs, y, mask=offs < n)


class Scaled(torch.autograd.Function):
    """``alpha * x``, with a shortcut at ``alpha == 1``: ``alpha`` stays a float (its name)."""

    @staticmethod
    def forward(ctx, x, alpha):
        x = x.contiguous()
        y = torch.empty_like(x)
        _scaled_fwd[(triton.cdiv(x.numel(), 64),)](x, y, x.numel(), alpha, BLOCK=64)
        ctx.alpha = alpha
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        return g * ctx.alpha, None
