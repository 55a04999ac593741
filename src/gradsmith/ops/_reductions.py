"""Reductions and normalisation: logsumexp and training-mode batch norm without affine."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from gradsmith._errors import GradsmithError
from gradsmith._example import example
from gradsmith.ops._common import example_input as _x64
from gradsmith.ops._common import opmath
from gradsmith.ops._validate import check_bool, check_dim, check_floating, check_positive


class _LogSumExpFn(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x, dims, keepdim):
        return torch.logsumexp(x, dims, keepdim)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, dims, keepdim = inputs
        ctx.dims, ctx.keepdim = dims, keepdim
        # Input and output: the gradient softmax(x) = exp(x - y) is rebuilt from both, and a
        # saved output stays connected to autograd, so double backward is exact.
        ctx.save_for_backward(x, output)

    @staticmethod
    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        if not ctx.keepdim and x.dim() > 0:
            for d in ctx.dims:  # ascending, so each index refers to the final layout
                y, grad = y.unsqueeze(d), grad.unsqueeze(d)
        return (grad * torch.exp(opmath(x) - y)).to(x.dtype), None, None


def _normalise_dims(x: torch.Tensor, dim: int | Sequence[int]) -> tuple[int, ...]:
    fn = "logsumexp"
    seq = (dim,) if not isinstance(dim, (tuple, list)) else tuple(dim)
    if not seq:
        raise GradsmithError(f"{fn}: dim must be an int or a non-empty tuple of ints, got {dim!r}")
    dims = tuple(sorted(check_dim(fn, "dim", d, x.dim()) for d in seq))
    if len(set(dims)) != len(dims):
        raise GradsmithError(f"{fn}: dim must not repeat a dimension, got {dim!r}")
    return dims


@example(lambda: (_x64(4, 5, scale=3.0), 1), name="logsumexp")
@example(lambda: (_x64(3, 4, 2, scale=3.0), (0, 2), True), name="logsumexp-multi-dim-keepdim")
def logsumexp(x: torch.Tensor, dim: int | Sequence[int], keepdim: bool = False) -> torch.Tensor:
    """``log(sum(exp(x)))`` along ``dim``, computed stably as ``m + log(sum(exp(x - m)))``.

    Gradient: ``grad * exp(x - y) = grad * softmax(x)`` along ``dim``; differentiable backward
    (second derivative: the softmax Jacobian ``diag(p) - p p^T``). Saves ``x`` and the output.

    Args:
        x: floating-point tensor.
        dim: a dimension or a tuple of dimensions to reduce.
        keepdim: keep the reduced dimensions with size 1.

    Returns:
        Tensor equal to ``torch.logsumexp(x, dim, keepdim)``.

    Raises:
        GradsmithError: if ``x`` is not floating point or ``dim`` is out of range or repeated.

    Example:
        >>> from gradsmith.functional import logsumexp
        >>> logsumexp(torch.tensor([[100.0, 100.0]]), dim=1)  # exp(100) overflows float32
        tensor([100.6931])
    """
    check_floating("logsumexp", "x", x)
    dims = _normalise_dims(x, dim)
    keepdim = check_bool("logsumexp", "keepdim", keepdim)
    return _LogSumExpFn.apply(x, dims, keepdim)


def _stats_dims(x: torch.Tensor) -> tuple[int, ...]:
    return (0, *range(2, x.dim()))


def _normalise(xf: torch.Tensor, dims: tuple[int, ...], eps: float):
    var, mean = torch.var_mean(xf, dims, correction=0, keepdim=True)
    rstd = torch.rsqrt(var + eps)
    return (xf - mean) * rstd, rstd


class _BatchNormFn(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x, eps):
        xhat, _ = _normalise(opmath(x), _stats_dims(x), eps)
        return xhat.to(x.dtype)

    @staticmethod
    def setup_context(ctx, inputs, output):
        # Only x is saved; the per-channel statistics are recomputed in backward (a cheap
        # reduction) with differentiable ops, which keeps second derivatives exact.
        ctx.save_for_backward(inputs[0])
        ctx.eps = inputs[1]

    @staticmethod
    def backward(ctx, grad):
        if not ctx.needs_input_grad[0]:
            return None, None
        (x,) = ctx.saved_tensors
        dims = _stats_dims(x)
        xhat, rstd = _normalise(opmath(x), dims, ctx.eps)
        g = opmath(grad)
        mean_g = g.mean(dims, keepdim=True)
        mean_gx = (g * xhat).mean(dims, keepdim=True)
        return (rstd * (g - mean_g - xhat * mean_gx)).to(x.dtype), None


def _check_batch_norm_input(fn: str, x: torch.Tensor) -> None:
    check_floating(fn, "x", x)
    if x.dim() < 2:
        raise GradsmithError(
            f"{fn}: x must have at least 2 dimensions (N, C, ...), got shape {tuple(x.shape)}; "
            f"add a batch dimension with x.unsqueeze(0)"
        )
    if x.numel() <= x.shape[1]:
        raise GradsmithError(
            f"{fn}: x must have more than one value per channel to compute batch statistics, "
            f"got shape {tuple(x.shape)}; use a batch of more than one sample"
        )


@example(lambda: (_x64(6, 3, scale=2.0, shift=1.0), 1e-5), name="batch_norm-2d")
@example(lambda: (_x64(4, 2, 3, 2), 1e-3), name="batch_norm-4d")
def batch_norm(x: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """Training-mode batch normalisation without affine parameters or running statistics.

    ``y = (x - mean) / sqrt(var + eps)`` with the mean and the biased variance taken per channel
    (dim 1) over every other dim, as ``F.batch_norm(x, None, None, training=True)``.

    Gradient, with means over the same dims: ``rstd * (g - mean(g) - y * mean(g * y))``;
    differentiable backward. Saves ``x`` only (the statistics are recomputed in backward).

    Args:
        x: floating tensor ``(N, C, ...)`` with more than one value per channel.
        eps: added to the variance, a finite number > 0 (``F.batch_norm`` also rejects 0 in
            training mode).

    Returns:
        Tensor of ``x``'s shape and dtype.

    Raises:
        GradsmithError: if ``x`` is not floating point, has fewer than 2 dims or one value per
            channel, or ``eps <= 0``.

    Example:
        >>> from gradsmith.functional import batch_norm
        >>> batch_norm(torch.tensor([[1.0], [3.0]]), eps=0.0001)
        tensor([[-1.0000],
                [ 1.0000]])

    References:
        Ioffe & Szegedy, "Batch Normalization", ICML 2015. arXiv:1502.03167.
    """
    _check_batch_norm_input("batch_norm", x)
    eps = check_positive("batch_norm", "eps", eps)
    return _BatchNormFn.apply(x, eps)


class BatchNorm(nn.Module):
    """Module form of :func:`batch_norm` (no affine, no running statistics, any ``C``).

    Example:
        >>> from gradsmith.nn import BatchNorm
        >>> BatchNorm(eps=1e-5)
        BatchNorm(eps=1e-05)
    """

    def __init__(self, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = check_positive("BatchNorm", "eps", eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return batch_norm(x, self.eps)

    def extra_repr(self) -> str:
        return f"eps={self.eps}"
