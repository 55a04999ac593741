"""PACT: parameterized clipping activation with a learned clip value (Choi et al. 2018).

A straight-through estimator like LSQ (``_quant``, whose fused fake-quantize forward and argument
checks it reuses): the forward clips to ``[0, alpha]`` and quantizes; the backward passes the
gradient through the rounding and gives ``alpha`` the paper's gradient. ``@once_differentiable``
for the reason given in ``_quant``. Saves ``x`` and ``alpha`` only.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.autograd.function import once_differentiable

from gradsmith._example import example
from gradsmith.ops._deploy import ESTIMATOR_EXPORT_GAP
from gradsmith.ops._quant import (
    _BITS_HINT,
    _CHECKS,
    _check_scalar_param,
    _fused_fake_quantize,
)
from gradsmith.ops._validate import check_floating, check_int, check_positive

__all__ = ["pact", "pact_surrogate", "PACT"]


def _pact_example():
    gen = torch.Generator().manual_seed(1)
    x = (torch.rand(3, 5, generator=gen, dtype=torch.float64) * 6 - 1).requires_grad_()
    return x, torch.tensor(3.3, dtype=torch.float64, requires_grad=True), 4


def _pact_fn_example():
    x, alpha, bits = _pact_example()
    return x, alpha, 2 ** bits - 1


def _pact_fn_surrogate(x, alpha, levels):
    y = torch.minimum(torch.clamp(x, min=0), alpha)
    return y + ((y * levels / alpha).round() * alpha / levels - y).detach()


@example(_pact_fn_example, surrogate=_pact_fn_surrogate, name="pact-4bit",
         gaps=ESTIMATOR_EXPORT_GAP)
class _PACTFn(torch.autograd.Function):
    @staticmethod
    def forward(x, alpha, levels):
        scale = alpha.detach().reshape(()) / levels
        return _fused_fake_quantize(x.clamp(min=0), scale, 0, levels)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, alpha, _ = inputs
        ctx.save_for_backward(x, alpha)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        x, alpha = ctx.saved_tensors
        above = x >= alpha.reshape(())
        grad_x = grad * ((x >= 0) & ~above) if ctx.needs_input_grad[0] else None
        grad_alpha = None
        if ctx.needs_input_grad[1]:
            # Choi et al. eq. (3): d y_q / d alpha = 1 where x >= alpha (rounding passed through).
            grad_alpha = grad.masked_fill(~above, 0).sum().reshape(alpha.shape).to(alpha.dtype)
        return grad_x, grad_alpha, None

    @staticmethod
    def vmap(info, in_dims, x, alpha, levels):
        x_dim, a_dim = in_dims[0], in_dims[1]
        if a_dim is None:
            x = x if x_dim is None else x.movedim(x_dim, 0)
            return _PACTFn.apply(x, alpha, levels), (None if x_dim is None else 0)
        xs = x.movedim(x_dim, 0) if x_dim is not None else x.expand(info.batch_size, *x.shape)
        out = torch.stack([_PACTFn.apply(xi, ai, levels)
                           for xi, ai in zip(xs.unbind(0), alpha.movedim(a_dim, 0).unbind(0))])
        return out, 0


def pact_surrogate(x: torch.Tensor, alpha: torch.Tensor, bits: int = 8) -> torch.Tensor:
    """Plain-autograd PACT whose gradients equal :func:`pact`'s estimator.

    Example:
        >>> pact_surrogate(torch.tensor([-1.0, 0.4, 7.0]), torch.tensor(1.0), bits=2)
        tensor([0.0000, 0.3333, 1.0000])
    """
    y = torch.minimum(torch.clamp(x, min=0), alpha)
    levels = 2 ** bits - 1
    return y + ((y * levels / alpha).round() * alpha / levels - y).detach()


@example(lambda: _pact_example(), surrogate=pact_surrogate, name="pact-4bit", checks=_CHECKS,
         gaps=ESTIMATOR_EXPORT_GAP)
def pact(x: torch.Tensor, alpha, bits: int = 8) -> torch.Tensor:
    """PACT activation: clip to ``[0, alpha]`` with a learned ``alpha``, then quantize (Choi 2018).

    Forward: ``y = clamp(x, 0, alpha)``, ``round(y * (2^b - 1) / alpha) * alpha / (2^b - 1)``.
    Backward (straight-through): ``dx = 1`` where ``0 <= x < alpha``; ``d alpha = 1`` where
    ``x >= alpha`` (the paper's eq. 3). Not twice differentiable (``once_differentiable``).

    Args:
        x: floating tensor (activations).
        alpha: clip value ``> 0``: a one-element tensor (learnable) or a number.
        bits: 1..16.

    Returns:
        Tensor like ``x`` with values in ``{k * alpha / (2^b - 1)}``.

    Raises:
        GradsmithError: non-floating ``x``, ``bits`` outside 1..16, ``alpha <= 0``.

    Example:
        >>> pact(torch.tensor([-1.0, 0.4, 7.0]), torch.tensor(1.0), bits=2)
        tensor([0.0000, 0.3333, 1.0000])

    References:
        Choi, Wang, Venkataramani, Chuang, Srinivasan, Gopalakrishnan. "PACT: Parameterized
        Clipping Activation for Quantized Neural Networks", arXiv:1805.06085, 2018.
    """
    fn = "pact"
    check_floating(fn, "x", x)
    bits = check_int(fn, "bits", bits, min_value=1, max_value=16,
                     hint=_BITS_HINT)
    alpha = _check_scalar_param(fn, "alpha", alpha, x)
    return _PACTFn.apply(x, alpha, 2 ** bits - 1)


class PACT(nn.Module):
    """PACT activation with a learned clip value ``alpha`` (the paper initialises it to 10).

    Example:
        >>> PACT(bits=4)
        PACT(bits=4, alpha=10.0)
    """

    def __init__(self, bits: int = 8, alpha: float = 10.0):
        super().__init__()
        self.bits = check_int("PACT", "bits", bits, min_value=1, max_value=16,
                              hint=_BITS_HINT)
        self.alpha = nn.Parameter(torch.tensor(check_positive("PACT", "alpha", alpha)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return pact(x, self.alpha, self.bits)

    def extra_repr(self) -> str:
        return f"bits={self.bits}, alpha={float(self.alpha.detach())}"
