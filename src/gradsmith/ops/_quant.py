"""Quantization-aware training: learned step size (LSQ, Esser et al. 2019) and shared helpers.

PACT (Choi et al. 2018, ``_pact``) reuses the fused forward and the argument checks here.

Both are straight-through estimators: the forward quantizes; the backward passes the gradient
through the rounding as if it were the identity and gives the learned range parameter the
gradient derived in the paper. Each public function declares a *surrogate*, a smooth-almost-
everywhere function whose autograd gradient equals the estimator's, for ``gradsmith check``.

The forward uses PyTorch's fused fake-quantize kernel (one pass, the same rounding as
``torch.ao.quantization``). The backward is ``@once_differentiable``: a second derivative of a
straight-through estimator has no agreed meaning (the surrogate's and the formula's differ), so
asking for one raises instead of returning a silently arbitrary value. Only the input and the
scale are saved, like PyTorch's learnable fake-quantize.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.autograd.function import once_differentiable

from gradsmith._errors import GradsmithError
from gradsmith._example import example
from gradsmith.ops._deploy import DEPLOY_CHECKS, ESTIMATOR_EXPORT_GAP
from gradsmith.ops._validate import (
    check_bool,
    check_devices,
    check_fits,
    check_floating,
    check_int,
    check_positive,
)

_BITS_HINT = "8 bits is the usual choice for weights and activations"

__all__ = ["fake_quantize_lsq", "lsq_init_scale", "FakeQuantizeLSQ", "lsq_surrogate",
           "quant_range"]


def quant_range(bits: int, signed: bool) -> tuple[int, int]:
    """Integer range ``(Qn, Qp)``: ``[-2^(b-1), 2^(b-1) - 1]`` signed, ``[0, 2^b - 1]`` unsigned.

    Example:
        >>> quant_range(8, True), quant_range(4, False)
        ((-128, 127), (0, 15))
    """
    return (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2 ** bits - 1)


def _lsq_example():
    gen = torch.Generator().manual_seed(0)
    # Values kept away from rounding ties and clip edges so finite differences stay inside one
    # piece of the piecewise-linear forward.
    codes = torch.randint(-10, 10, (3, 5), generator=gen).double()
    offsets = torch.rand(3, 5, generator=gen, dtype=torch.float64) * 0.6 - 0.3
    x = ((codes + offsets) * 0.2).requires_grad_()
    return x, torch.tensor(0.2, dtype=torch.float64, requires_grad=True), 4


def _fused_fake_quantize(x: torch.Tensor, scale: torch.Tensor, qn: int, qp: int) -> torch.Tensor:
    scale = scale.reshape(())
    if x.dtype == torch.float64:  # the fused kernel takes a float32 scale: keep float64 exact
        return (x / scale).round().clamp(qn, qp) * scale
    zero = torch.zeros((), dtype=torch.int32, device=x.device)
    return torch.fake_quantize_per_tensor_affine(x, scale.to(torch.float32), zero, qn, qp)


def _lsq_fn_example():
    x, scale, bits = _lsq_example()
    return x, scale, -(2 ** (bits - 1)), 2 ** (bits - 1) - 1, 0.5


def _lsq_fn_surrogate(x, scale, qn, qp, grad_scale):
    s = scale * grad_scale + (scale - scale * grad_scale).detach()
    c = (x / s).clamp(qn, qp)
    return (c + (c.round() - c).detach()) * s


@example(_lsq_fn_example, surrogate=_lsq_fn_surrogate, name="lsq-4bit",
         gaps=ESTIMATOR_EXPORT_GAP)
class _LSQFn(torch.autograd.Function):
    @staticmethod
    def forward(x, scale, qn, qp, grad_scale):
        return _fused_fake_quantize(x, scale, qn, qp)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, scale, qn, qp, grad_scale = inputs
        ctx.save_for_backward(x, scale)
        ctx.qn, ctx.qp, ctx.grad_scale = qn, qp, grad_scale

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        x, scale = ctx.saved_tensors
        v = x / scale
        q = v.clamp(ctx.qn, ctx.qp)
        inside = v == q  # [Qn, Qp]: the straight-through region
        grad_x = grad * inside
        grad_scale = None
        if ctx.needs_input_grad[1]:
            # Esser et al. eq. (3): round(v) - v inside, Qn below, Qp above. Summed against grad
            # as dot(grad, round(clamp(v))) - dot(grad * inside, v): two read-only BLAS passes
            # instead of materialising the per-element term.
            g = grad.reshape(-1).to(q.dtype)
            total = torch.dot(g, q.round_().reshape(-1)) - torch.dot(
                grad_x.reshape(-1).to(q.dtype), v.reshape(-1))
            grad_scale = (total * ctx.grad_scale).reshape(scale.shape).to(scale.dtype)
        return (grad_x if ctx.needs_input_grad[0] else None), grad_scale, None, None, None

    @staticmethod
    def vmap(info, in_dims, x, scale, qn, qp, grad_scale):
        x_dim, s_dim = in_dims[0], in_dims[1]
        if s_dim is None:
            x = x if x_dim is None else x.movedim(x_dim, 0)
            return _LSQFn.apply(x, scale, qn, qp, grad_scale), (None if x_dim is None else 0)
        # A batch of scales: quantize each slice with its own scale.
        xs = x.movedim(x_dim, 0) if x_dim is not None else x.expand(info.batch_size, *x.shape)
        scales = scale.movedim(s_dim, 0)
        out = torch.stack([_LSQFn.apply(xi, si, qn, qp, grad_scale)
                           for xi, si in zip(xs.unbind(0), scales.unbind(0))])
        return out, 0


def _is_concrete(value: torch.Tensor) -> bool:
    """False under vmap/grad transforms and torch.compile, where a value check cannot run."""
    return not (torch.compiler.is_compiling()
                or torch._C._functorch.is_functorch_wrapped_tensor(value))


def _check_scalar_param(fn: str, name: str, value, x: torch.Tensor) -> torch.Tensor:
    check_devices(fn, ("x", x))
    if not isinstance(value, torch.Tensor):
        value = check_fits(fn, name, check_positive(fn, name, value), x.dtype)
        value = torch.tensor(value, dtype=x.dtype, device=x.device)
    check_floating(fn, name, value)
    check_devices(fn, ("x", x), (name, value))
    if value.numel() != 1:
        raise GradsmithError(
            f"{fn}: {name} must hold one value (per-tensor quantization), got shape "
            f"{tuple(value.shape)}; use one {type(value).__name__} per tensor"
        )
    if _is_concrete(value):
        number = float(value.detach().reshape(()).item())
        if not number > 0 or not math.isfinite(number):
            raise GradsmithError(
                f"{fn}: {name} must be a finite value > 0, got {number}; initialise it with "
                f"lsq_init_scale(x) (LSQ) or a positive clip value such as 10.0 (PACT)"
            )
        check_fits(fn, name, number, x.dtype)
    return value


def lsq_surrogate(x: torch.Tensor, scale: torch.Tensor, bits: int = 8, signed: bool = True,
                  grad_scale: float | None = None) -> torch.Tensor:
    """Plain-autograd LSQ whose gradients equal :func:`fake_quantize_lsq`'s estimator.

    Rounding is written ``c + (round(c) - c).detach()`` (identity gradient) and the step size's
    gradient is scaled with ``s * g + (s - s * g).detach()``, the paper's own trick.

    Example:
        >>> x, s = torch.tensor([0.26, 9.0]), torch.tensor(0.1)
        >>> lsq_surrogate(x, s, bits=4)
        tensor([0.3000, 0.7000])
    """
    qn, qp = quant_range(bits, signed)
    g = _default_grad_scale(x, qp) if grad_scale is None else grad_scale
    s = scale * g + (scale - scale * g).detach()
    c = (x / s).clamp(qn, qp)
    return (c + (c.round() - c).detach()) * s


def _default_grad_scale(x: torch.Tensor, qp: int) -> float:
    return 1.0 / math.sqrt(max(x.numel(), 1) * qp)


# A plain function hides once_differentiable from the checker: skip its second-order check.
# "surrogate" compares backward with the declared surrogate, which replaces the gradients check.
_CHECKS = ("structure", "mutation", "gradients", "surrogate", "forward_ad", "vmap", "robustness",
           "randomness", "hygiene", *DEPLOY_CHECKS)


@example(lambda: _lsq_example(), surrogate=lsq_surrogate, name="lsq-4bit", checks=_CHECKS,
         gaps=ESTIMATOR_EXPORT_GAP)
def fake_quantize_lsq(x: torch.Tensor, scale, bits: int = 8, signed: bool = True,
                      grad_scale: float | None = None) -> torch.Tensor:
    """Fake-quantize ``x`` with a learned step size (LSQ, Esser et al. 2019).

    Forward: ``round(clamp(x / s, Qn, Qp)) * s`` with ``(Qn, Qp) = quant_range(bits, signed)``.
    Backward (straight-through): ``dx = 1`` where ``Qn <= x / s <= Qp`` and 0 elsewhere;
    ``ds = g * sum(round(x / s) - x / s)`` inside, ``Qn`` below, ``Qp`` above, with gradient
    scale ``g = 1 / sqrt(numel(x) * Qp)`` by default. PyTorch's
    ``torch._fake_quantize_learnable_per_tensor_affine`` tests the *rounded* value against the
    range, so the two differ only where ``x / s`` lies within half a step outside ``[Qn, Qp]``;
    this follows the paper. Not twice differentiable (``once_differentiable``).

    Args:
        x: floating tensor.
        scale: step size ``s > 0``: a one-element tensor (learnable) or a number.
        bits: 2..16.
        signed: signed range ``[-2^(b-1), 2^(b-1) - 1]`` or unsigned ``[0, 2^b - 1]``.
        grad_scale: multiplier of the step size's gradient; ``None`` for the paper's default.

    Returns:
        Tensor like ``x`` holding multiples of ``s``.

    Raises:
        GradsmithError: non-floating ``x``, ``bits`` outside 2..16, ``scale <= 0`` or not a
            single value, ``grad_scale <= 0``.

    Example:
        >>> fake_quantize_lsq(torch.tensor([0.26, -0.04, 9.0]), torch.tensor(0.1), bits=4)
        tensor([0.3000, 0.0000, 0.7000])

    References:
        Esser, McKinstry, Bablani, Appuswamy, Modha. "Learned Step Size Quantization", ICLR 2020
        (arXiv:1902.08153, 2019).
    """
    fn = "fake_quantize_lsq"
    check_floating(fn, "x", x)
    bits = check_int(fn, "bits", bits, min_value=2, max_value=16,
                     hint=_BITS_HINT)
    signed = check_bool(fn, "signed", signed)
    scale = _check_scalar_param(fn, "scale", scale, x)
    qn, qp = quant_range(bits, signed)
    g = _default_grad_scale(x, qp) if grad_scale is None else check_positive(
        fn, "grad_scale", grad_scale)
    return _LSQFn.apply(x, scale, qn, qp, g)


def lsq_init_scale(x: torch.Tensor, bits: int = 8, signed: bool = True) -> torch.Tensor:
    """The paper's step-size initialisation ``2 * mean(|x|) / sqrt(Qp)`` (a detached scalar).

    Example:
        >>> lsq_init_scale(torch.tensor([1.0, -3.0]), bits=3)
        tensor(2.3094)
    """
    fn = "lsq_init_scale"
    check_floating(fn, "x", x)
    check_devices(fn, ("x", x))
    _, qp = quant_range(check_int(fn, "bits", bits, min_value=2, max_value=16,
                     hint=_BITS_HINT),
                        check_bool(fn, "signed", signed))
    scale = 2 * x.detach().abs().mean() / math.sqrt(qp)
    if not bool(scale > 0):
        raise GradsmithError(f"{fn}: x must not be all zeros (the initial step would be 0)")
    return scale


class FakeQuantizeLSQ(nn.Module):
    """LSQ fake-quantizer with a learned step size, initialised from the first batch it sees.

    Example:
        >>> q = FakeQuantizeLSQ(bits=4)
        >>> q
        FakeQuantizeLSQ(bits=4, signed=True)
        >>> q(torch.tensor([1.0, -3.0])).shape, bool(q.scale > 0)
        (torch.Size([2]), True)
    """

    def __init__(self, bits: int = 8, signed: bool = True, grad_scale: float | None = None):
        super().__init__()
        name = "FakeQuantizeLSQ"
        self.bits = check_int(name, "bits", bits, min_value=2, max_value=16,
                              hint=_BITS_HINT)
        self.signed = check_bool(name, "signed", signed)
        self.grad_scale = None if grad_scale is None else check_positive(
            name, "grad_scale", grad_scale)
        self.scale = nn.Parameter(torch.ones(()))
        self.register_buffer("initialized", torch.tensor(False))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not bool(self.initialized):
            with torch.no_grad():
                self.scale.copy_(lsq_init_scale(x, self.bits, self.signed))
                self.initialized.fill_(True)
        return fake_quantize_lsq(x, self.scale, self.bits, self.signed, self.grad_scale)

    def extra_repr(self) -> str:
        extra = "" if self.grad_scale is None else f", grad_scale={self.grad_scale}"
        return f"bits={self.bits}, signed={self.signed}{extra}"
