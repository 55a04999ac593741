"""Gumbel-softmax sampling with a straight-through hard mode."""

from __future__ import annotations

import torch
from torch import nn

from gradsmith._errors import GradsmithError
from gradsmith._example import example
from gradsmith.ops._deploy import ESTIMATOR_EXPORT_GAP
from gradsmith.ops._validate import (
    check_bool,
    check_devices,
    check_dim,
    check_fits,
    check_floating,
    check_generator,
    check_positive,
)


def gumbel_noise(like: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """Standard Gumbel noise ``-log(E)``, ``E ~ Exponential(1)``, shaped like ``like``.

    Drawn exactly as ``torch.nn.functional.gumbel_softmax`` draws it (so with
    ``generator=None`` both consume the global RNG identically). ``E`` is floored at the
    smallest normal number so a rare exact zero cannot produce an infinite sample.
    """
    # Contiguous layout whatever ``like``'s strides: the RNG fills memory in order, so a
    # transposed input must not get a differently assigned sample (F.gumbel_softmax does the same).
    e = torch.empty_like(like, memory_format=torch.legacy_contiguous_format)
    e = e.exponential_(generator=generator)
    return -e.clamp_min(torch.finfo(e.dtype).tiny).log()


def _soft_vjp(grad: torch.Tensor, y_soft: torch.Tensor, tau: float, dim: int) -> torch.Tensor:
    # Softmax VJP, scaled by the temperature: y * (g - <g, y>) / tau.
    return y_soft * (grad - (grad * y_soft).sum(dim, keepdim=True)) / tau


class _GumbelSoftmaxFn(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(logits, gumbels, tau, hard, dim):
        y_soft = torch.softmax((logits + gumbels) / tau, dim)
        if not hard:
            return y_soft
        index = y_soft.argmax(dim, keepdim=True)
        return torch.zeros_like(y_soft).scatter(dim, index, 1.0)

    @staticmethod
    def setup_context(ctx, inputs, output):
        logits, gumbels, tau, hard, dim = inputs
        ctx.tau, ctx.hard, ctx.dim = tau, hard, dim
        if hard:
            # The forward value is one-hot, so the soft sample must be recomputed from the
            # inputs in backward: saving it from forward would cut it off from autograd and
            # make the second derivative silently wrong.
            ctx.save_for_backward(logits, gumbels)
        else:
            ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx, grad):
        if not any(ctx.needs_input_grad[:2]):
            return None, None, None, None, None
        if ctx.hard:
            logits, gumbels = ctx.saved_tensors
            y_soft = torch.softmax((logits + gumbels) / ctx.tau, ctx.dim)
        else:
            (y_soft,) = ctx.saved_tensors
        # logits and noise enter as a sum, so they share one gradient (the public function
        # passes noise that needs none; a caller supplying learnable noise still gets it right).
        g = _soft_vjp(grad, y_soft, ctx.tau, ctx.dim)
        grad_logits = g if ctx.needs_input_grad[0] else None
        grad_gumbels = g if ctx.needs_input_grad[1] else None
        return grad_logits, grad_gumbels, None, None, None


def _soft_surrogate(logits, tau=1.0, hard=False, dim=-1, generator=None):
    return torch.softmax((logits + gumbel_noise(logits, generator)) / tau, dim)


def _logits64() -> torch.Tensor:
    gen = torch.Generator().manual_seed(0)
    return torch.randn(3, 5, dtype=torch.float64, generator=gen)


@example(lambda: (_logits64(), 0.5, True, -1, None), surrogate=_soft_surrogate,
         name="gumbel_softmax-hard", gaps=ESTIMATOR_EXPORT_GAP)
@example(lambda: (_logits64(), 0.7, False, 0, None), surrogate=_soft_surrogate,
         name="gumbel_softmax-soft")
def gumbel_softmax(logits: torch.Tensor, tau: float = 1.0, hard: bool = False, dim: int = -1,
                   generator: torch.Generator | None = None) -> torch.Tensor:
    """Gumbel-softmax sample ``softmax((logits + g) / tau)`` with Gumbel noise ``g``.

    With ``hard=True`` the forward value is the one-hot ``argmax`` of that sample while the
    gradient is the soft sample's (a straight-through estimator; surrogate: the soft sample with
    the same noise). Gradient of the soft sample ``y``: ``y * (grad - sum(grad * y)) / tau``
    along ``dim``; the backward is differentiable in both modes. Saves the soft output, or in
    hard mode the logits and the noise.

    The noise is drawn as ``torch.nn.functional.gumbel_softmax`` draws it, from ``generator``
    or, when ``None``, the global RNG (so values match that function under the same seed).
    ``torch.compile(fullgraph=True)`` cannot trace a ``torch.Generator`` argument: under compile
    pass ``generator=None`` and seed the global RNG.

    Args:
        logits: floating-point tensor of unnormalised log-probabilities, at least 1-d.
        tau: temperature, a finite number > 0.
        hard: return one-hot samples with soft gradients.
        dim: the category dimension.
        generator: optional ``torch.Generator`` for reproducible noise.

    Returns:
        Tensor of ``logits``' shape: samples on the simplex along ``dim`` (one-hot if hard).

    Raises:
        GradsmithError: if ``logits`` is not floating point or 0-d, ``tau <= 0``, ``hard`` is
            not a bool, ``dim`` is out of range, or ``generator`` is not a Generator.

    Example:
        >>> from gradsmith.functional import gumbel_softmax
        >>> gen = torch.Generator().manual_seed(0)
        >>> y = gumbel_softmax(torch.zeros(2, 4), hard=True, generator=gen)
        >>> y.sum(-1)
        tensor([1., 1.])

    References:
        Jang, Gu & Poole, "Categorical Reparameterization with Gumbel-Softmax", ICLR 2017.
        Maddison, Mnih & Teh, "The Concrete Distribution", ICLR 2017.
    """
    check_floating("gumbel_softmax", "logits", logits)
    if logits.dim() == 0:
        raise GradsmithError(
            "gumbel_softmax: logits must have at least 1 dimension (the categories), got a "
            "0-d tensor; pass e.g. logits.unsqueeze(0)"
        )
    check_devices("gumbel_softmax", ("logits", logits))
    tau = check_positive("gumbel_softmax", "tau", tau)
    check_fits("gumbel_softmax", "tau", tau, logits.dtype)
    hard = check_bool("gumbel_softmax", "hard", hard)
    dim = check_dim("gumbel_softmax", "dim", dim, logits.dim())
    generator = check_generator("gumbel_softmax", "generator", generator)
    if generator is not None and generator.device.type != logits.device.type:
        raise GradsmithError(
            f"gumbel_softmax: generator is on {generator.device} but logits is on "
            f"{logits.device}; create it on the logits' device: "
            f"torch.Generator(device=logits.device)")
    gumbels = gumbel_noise(logits.detach(), generator)
    return _GumbelSoftmaxFn.apply(logits, gumbels, tau, hard, dim)


class GumbelSoftmax(nn.Module):
    """Module form of :func:`gumbel_softmax`; ``forward(logits, generator=None)``.

    Example:
        >>> from gradsmith.nn import GumbelSoftmax
        >>> GumbelSoftmax(tau=0.5, hard=True)
        GumbelSoftmax(tau=0.5, hard=True, dim=-1)
    """

    def __init__(self, tau: float = 1.0, hard: bool = False, dim: int = -1) -> None:
        super().__init__()
        self.tau = check_positive("GumbelSoftmax", "tau", tau)
        self.hard = check_bool("GumbelSoftmax", "hard", hard)
        if isinstance(dim, bool) or not isinstance(dim, int):
            check_dim("GumbelSoftmax", "dim", dim, 1)
        self.dim = dim

    def forward(self, logits: torch.Tensor,
                generator: torch.Generator | None = None) -> torch.Tensor:
        return gumbel_softmax(logits, self.tau, self.hard, self.dim, generator)

    def extra_repr(self) -> str:
        return f"tau={self.tau}, hard={self.hard}, dim={self.dim}"
