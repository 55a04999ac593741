"""Re-implementations of PyTorch builtins: how to write them, and why you should not ship them.

The tutorials' first rule is "don't write a custom Function for what PyTorch has": a Python
Function cannot beat the fused C++ kernel at its own job (``gradsmith bench
gradsmith.examples.builtins`` measures these 3-5x slower than the builtins they copy, with the
same memory). They are here as verified templates of three common shapes of backward, each
registered with the builtin as its ``reference=``:

- :class:`Gelu` and :class:`Silu`: save the input, rebuild the derivative from it with
  differentiable ops, so second derivatives stay exact;
- :class:`BatchNorm`: save only the input and recompute the per-channel statistics in
  backward (a cheap reduction) instead of saving them.

``StopGradient`` (:mod:`~gradsmith.examples.gradient_control`) is the fourth former catalog
op: ``x.detach()`` does the same for free.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch.autograd import Function

from gradsmith._errors import GradsmithError
from gradsmith._example import example
from gradsmith.examples._inputs import randn

_INV_SQRT2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


@example(lambda: (randn(4, 5),), reference=F.gelu)
class Gelu(Function):  # noqa: GS302
    """GELU, exact form ``x * Phi(x)``; gradient ``Phi(x) + x * phi(x)`` from the saved input.

    Prefer ``torch.nn.functional.gelu``: this is the template, not a faster kernel.

    Example:
        >>> Gelu.apply(torch.tensor([0.0, 1.0]))
        tensor([0.0000, 0.8413])

    References:
        Hendrycks & Gimpel, "Gaussian Error Linear Units (GELUs)", 2016. arXiv:1606.08415.
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(x):  # noqa: GS302
        return F.gelu(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        cdf = 0.5 * (1.0 + torch.erf(x * _INV_SQRT2))
        pdf = torch.exp(-0.5 * x * x) * _INV_SQRT_2PI
        return grad * (cdf + x * pdf)


@example(lambda: (randn(4, 5),), reference=F.silu)
class Silu(Function):  # noqa: GS302
    """SiLU ``x * sigmoid(x)``; gradient ``s * (1 + x * (1 - s))`` with ``s = sigmoid(x)``.

    Prefer ``torch.nn.functional.silu``: this is the template, not a faster kernel.

    Example:
        >>> Silu.apply(torch.tensor([0.0, 2.0]))
        tensor([0.0000, 1.7616])
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(x):  # noqa: GS302
        return F.silu(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(x)
        return grad * (s * (1.0 + x * (1.0 - s)))


def _stats_dims(x: torch.Tensor) -> tuple[int, ...]:
    return (0, *range(2, x.dim()))


def _normalise(x: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    var, mean = torch.var_mean(x, _stats_dims(x), correction=0, keepdim=True)
    rstd = torch.rsqrt(var + eps)
    return (x - mean) * rstd, rstd


def _batch_norm_reference(x: torch.Tensor, eps: float) -> torch.Tensor:
    return F.batch_norm(x, None, None, training=True, eps=eps)


@example(lambda: (randn(6, 3), 1e-5), reference=_batch_norm_reference, name="2d")
@example(lambda: (randn(4, 2, 3, 2, seed=1), 1e-3), reference=_batch_norm_reference, name="4d")
class BatchNorm(Function):
    """Training-mode batch norm without affine or running statistics, per channel (dim 1).

    ``y = (x - mean) * rstd``; gradient ``rstd * (g - mean(g) - y * mean(g * y))``. Saves only
    ``x``: the statistics are recomputed in backward with differentiable ops, so second
    derivatives stay exact. Prefer ``F.batch_norm(x, None, None, training=True)``.

    Example:
        >>> BatchNorm.apply(torch.tensor([[1.0], [3.0]]), 1e-4)
        tensor([[-1.0000],
                [ 1.0000]])

    References:
        Ioffe & Szegedy, "Batch Normalization", ICML 2015. arXiv:1502.03167.
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(x, eps):
        if x.dim() < 2 or x.numel() <= x.shape[1]:
            raise GradsmithError(
                f"BatchNorm: x must be (N, C, ...) with more than one value per channel, got "
                f"shape {tuple(x.shape)}; use a batch of more than one sample")
        if not (isinstance(eps, float) and eps > 0):
            raise GradsmithError(f"BatchNorm: eps must be a float > 0, got {eps!r}; e.g. 1e-5")
        return _normalise(x, eps)[0]

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])
        ctx.eps = inputs[1]

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        dims = _stats_dims(x)
        xhat, rstd = _normalise(x, ctx.eps)
        mean_g = grad.mean(dims, keepdim=True)
        mean_gx = (grad * xhat).mean(dims, keepdim=True)
        return rstd * (grad - mean_g - xhat * mean_gx), None
