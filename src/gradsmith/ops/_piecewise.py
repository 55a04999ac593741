"""Piecewise activations: clipped ReLU, soft threshold (L1 proximal map), soft round.

Clipped ReLU and soft threshold are piecewise linear: their backward multiplies by a saved
boolean mask (1 byte per element instead of the input), and their exact second derivative is
zero almost everywhere, which a mask-times-grad backward reproduces.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from gradsmith._example import example
from gradsmith.ops._common import example_input as _x64
from gradsmith.ops._common import opmath, reduce_to, scalar_or_tensor
from gradsmith.ops._validate import (
    check_devices,
    check_fits,
    check_floating,
    check_nonnegative,
    check_positive,
)


class _ClippedReLUFn(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x, clip_val):
        return x.clamp(0.0, clip_val)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, clip_val = inputs
        ctx.save_for_backward((x >= 0) & (x <= clip_val))

    @staticmethod
    def backward(ctx, grad):
        (mask,) = ctx.saved_tensors
        return grad * mask, None


@example(lambda: (_x64(4, 5, scale=4.0), 6.0), name="clipped_relu")
def clipped_relu(x: torch.Tensor, clip_val: float = 6.0) -> torch.Tensor:
    """Clipped ReLU ``min(max(x, 0), clip_val)`` (ReLU6 for ``clip_val=6``).

    Gradient: 1 on ``0 <= x <= clip_val``, 0 elsewhere (at the two kinks it follows
    ``torch.clamp``, which passes the gradient). Saves a boolean mask, not ``x``.

    Args:
        x: floating-point tensor.
        clip_val: upper bound, a finite number > 0.

    Returns:
        Tensor of ``x``'s shape and dtype.

    Raises:
        GradsmithError: if ``x`` is not floating point or ``clip_val <= 0``.

    Example:
        >>> from gradsmith.functional import clipped_relu
        >>> clipped_relu(torch.tensor([-1.0, 2.0, 5.0, 8.0]), clip_val=6.0)
        tensor([0., 2., 5., 6.])
    """
    check_floating("clipped_relu", "x", x)
    check_devices("clipped_relu", ("x", x))
    clip_val = check_positive("clipped_relu", "clip_val", clip_val)
    check_fits("clipped_relu", "clip_val", clip_val, x.dtype)
    return _ClippedReLUFn.apply(x, clip_val)


class ClippedReLU(nn.Module):
    """Module form of :func:`clipped_relu`.

    Example:
        >>> from gradsmith.nn import ClippedReLU
        >>> ClippedReLU(clip_val=6.0)
        ClippedReLU(clip_val=6.0)
    """

    def __init__(self, clip_val: float = 6.0) -> None:
        super().__init__()
        self.clip_val = check_positive("ClippedReLU", "clip_val", clip_val)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return clipped_relu(x, self.clip_val)

    def extra_repr(self) -> str:
        return f"clip_val={self.clip_val}"


class _SoftThresholdFn(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x, threshold):
        return torch.sign(x) * torch.relu(x.abs() - threshold)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, threshold = inputs
        ctx.t_is_tensor = isinstance(threshold, torch.Tensor)
        active = x.abs() > threshold
        if ctx.t_is_tensor:
            # sign(x) on the active set is the threshold's (negated) gradient: keep it as int8.
            ctx.save_for_backward(torch.sign(x).to(torch.int8) * active, threshold)
        else:
            ctx.save_for_backward(active)

    @staticmethod
    def backward(ctx, grad):
        if not ctx.t_is_tensor:
            (active,) = ctx.saved_tensors
            return grad * active, None
        signed, threshold = ctx.saved_tensors
        grad_x = grad_t = None
        if ctx.needs_input_grad[0]:
            grad_x = grad * signed.abs()
        if ctx.needs_input_grad[1]:
            grad_t = reduce_to(-(grad * signed), threshold)
        return grad_x, grad_t


@example(lambda: (_x64(4, 5), 0.5), name="soft_threshold")
@example(lambda: (_x64(4, 5).requires_grad_(),
                   torch.full((1, 5), 0.3, dtype=torch.float64, requires_grad=True)),
         name="soft_threshold-learnable")
def soft_threshold(x: torch.Tensor, threshold: float | torch.Tensor) -> torch.Tensor:
    """Soft thresholding ``sign(x) * max(|x| - threshold, 0)``, the proximal map of the L1 norm.

    Gradients: ``dy/dx = 1`` where ``|x| > threshold`` else 0; ``dy/dthreshold = -sign(x)``
    where ``|x| > threshold`` else 0 (summed to the threshold's shape), as learned-threshold
    models (LISTA) need. Saves a boolean mask (an int8 sign when the threshold is a tensor).

    Args:
        x: floating-point tensor.
        threshold: a number >= 0, or a floating tensor broadcastable to ``x`` (may require
            grad; its values are not checked, to stay free of host syncs under torch.compile).

    Returns:
        Tensor of ``x``'s shape.

    Raises:
        GradsmithError: if ``x`` is not floating point, or a numeric threshold is negative.

    Example:
        >>> from gradsmith.functional import soft_threshold
        >>> soft_threshold(torch.tensor([-2.0, -0.5, 0.5, 3.0]), 1.0)
        tensor([-1., -0.,  0.,  2.])

    References:
        Donoho, "De-noising by soft-thresholding", IEEE Trans. Inf. Theory, 1995.
        Gregor & LeCun, "Learning Fast Approximations of Sparse Coding" (LISTA), ICML 2010.
    """
    check_floating("soft_threshold", "x", x)
    threshold = scalar_or_tensor("soft_threshold", "threshold", threshold, x)
    check_devices("soft_threshold", ("x", x), ("threshold", threshold))
    if not isinstance(threshold, torch.Tensor):
        threshold = check_nonnegative("soft_threshold", "threshold", threshold)
        check_fits("soft_threshold", "threshold", threshold, x.dtype)
    return _SoftThresholdFn.apply(x, threshold)


class SoftThreshold(nn.Module):
    """Module form of :func:`soft_threshold`; the threshold can be a learned scalar.

    Example:
        >>> from gradsmith.nn import SoftThreshold
        >>> SoftThreshold(threshold=0.1, learnable=False)
        SoftThreshold(threshold=0.1, learnable=False)
    """

    def __init__(self, threshold: float, learnable: bool = False) -> None:
        super().__init__()
        threshold = check_nonnegative("SoftThreshold", "threshold", threshold)
        self.learnable = bool(learnable)
        self.threshold = nn.Parameter(torch.tensor(threshold)) if learnable else threshold

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return soft_threshold(x, self.threshold)

    def extra_repr(self) -> str:
        t = float(self.threshold.detach()) if self.learnable else self.threshold
        return f"threshold={t}, learnable={self.learnable}"


class _SoftRoundFn(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x, alpha):
        xf = opmath(x)
        base = torch.floor(xf) + 0.5
        r = xf - base
        return (base + torch.tanh(alpha * r) / (2.0 * math.tanh(alpha / 2.0))).to(x.dtype)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])
        ctx.alpha = inputs[1]

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        alpha = ctx.alpha
        xf = opmath(x)
        # floor() has a zero derivative, so r's derivative is 1 and double backward is exact.
        r = xf - (torch.floor(xf) + 0.5)
        th = torch.tanh(alpha * r)
        local = alpha * (1.0 - th * th) / (2.0 * math.tanh(alpha / 2.0))
        return (grad * local).to(x.dtype), None


@example(lambda: (_x64(4, 5, scale=2.0), 5.0), name="soft_round")
@example(lambda: (_x64(4, 5, scale=2.0), 0.5), name="soft_round-small-alpha")
def soft_round(x: torch.Tensor, alpha: float = 5.0) -> torch.Tensor:
    """Soft rounding of Agustsson & Theis (2020), a smooth stand-in for ``round``.

    ``s(x) = floor(x) + 1/2 + tanh(alpha * r) / (2 * tanh(alpha / 2))`` with
    ``r = x - floor(x) - 1/2``. It is continuous (and once continuously differentiable) for
    every ``x``, tends to the identity as ``alpha -> 0`` and to ``round`` as
    ``alpha -> inf``.

    Gradient: ``alpha * (1 - tanh(alpha r)^2) / (2 tanh(alpha / 2))``; differentiable backward.
    Saves ``x``.

    Args:
        x: floating-point tensor.
        alpha: sharpness, a finite number > 0.

    Returns:
        Tensor of ``x``'s shape and dtype.

    Raises:
        GradsmithError: if ``x`` is not floating point or ``alpha <= 0``.

    Example:
        >>> from gradsmith.functional import soft_round
        >>> soft_round(torch.tensor([0.0, 0.25, 0.5, 1.9]), alpha=5.0)
        tensor([0.0000, 0.0701, 0.5000, 1.9886])

    References:
        Agustsson & Theis, "Universally Quantized Neural Compression", NeurIPS 2020.
        arXiv:2006.09952.
    """
    check_floating("soft_round", "x", x)
    check_devices("soft_round", ("x", x))
    alpha = check_positive("soft_round", "alpha", alpha)
    check_fits("soft_round", "alpha", alpha, x.dtype)
    check_fits("soft_round", "alpha / 2", alpha / 2, x.dtype)
    return _SoftRoundFn.apply(x, alpha)


class SoftRound(nn.Module):
    """Module form of :func:`soft_round`.

    Example:
        >>> from gradsmith.nn import SoftRound
        >>> SoftRound(alpha=5.0)
        SoftRound(alpha=5.0)
    """

    def __init__(self, alpha: float = 5.0) -> None:
        super().__init__()
        self.alpha = check_positive("SoftRound", "alpha", alpha)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return soft_round(x, self.alpha)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}"
