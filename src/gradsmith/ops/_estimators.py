"""Gradient estimators: straight-through sign/round, gradient scaling, reversal, stop.

Each backward is the exact gradient of a declared smooth *surrogate* (registered with the
example, so ``gradsmith check`` compares against it): identity for ``round_ste``, identity or a
clamp for ``sign_ste``, ``alpha * x`` for ``grad_scale``. The backwards are linear in the
incoming gradient with constant coefficients, so their second derivatives (zero) are exact too.
"""

from __future__ import annotations

import torch

from gradsmith._errors import GradsmithError
from gradsmith._example import example
from gradsmith.ops._common import example_input as _x64
from gradsmith.ops._deploy import ESTIMATOR_EXPORT_GAP
from gradsmith.ops._validate import (
    check_devices,
    check_fits,
    check_floating,
    check_number,
    check_positive,
)


def _sign_surrogate(x: torch.Tensor, clip: float | None = None) -> torch.Tensor:
    return x if clip is None else x.clamp(-clip, clip)


class _SignSTEFn(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x, clip):
        return torch.sign(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, clip = inputs
        ctx.clip = clip
        if clip is not None:
            ctx.save_for_backward(x.abs() <= clip)

    @staticmethod
    def backward(ctx, grad):
        if ctx.clip is None:
            return grad, None
        (inside,) = ctx.saved_tensors
        return grad * inside, None


@example(lambda: (_x64(4, 5),), surrogate=_sign_surrogate, name="sign_ste",
         gaps=ESTIMATOR_EXPORT_GAP)
@example(lambda: (_x64(4, 5, scale=2.0), 1.0), surrogate=_sign_surrogate,
         name="sign_ste-clip", gaps=ESTIMATOR_EXPORT_GAP)
def sign_ste(x: torch.Tensor, clip: float | None = None) -> torch.Tensor:
    """``sign(x)`` forward, straight-through (identity) gradient backward.

    Gradient: ``grad`` unchanged (surrogate ``x``); with ``clip=c`` it is zeroed where
    ``|x| > c`` (surrogate ``clamp(x, -c, c)``; the "hardtanh" STE of binarized networks).
    ``sign(0) = 0`` as in ``torch.sign``. Saves a boolean mask only when ``clip`` is given.

    Args:
        x: floating-point tensor.
        clip: ``None`` or a finite number > 0.

    Returns:
        Tensor of ``x``'s shape with values in ``{-1, 0, 1}``.

    Raises:
        GradsmithError: if ``x`` is not floating point or ``clip <= 0``.

    Example:
        >>> from gradsmith.functional import sign_ste
        >>> x = torch.tensor([-2.0, -0.5, 0.5, 3.0], requires_grad=True)
        >>> sign_ste(x, clip=1.0).sum().backward()
        >>> x.grad
        tensor([0., 1., 1., 0.])

    References:
        Bengio, Leonard & Courville, "Estimating or Propagating Gradients Through Stochastic
        Neurons for Conditional Computation", 2013. arXiv:1308.3432.
    """
    check_floating("sign_ste", "x", x)
    check_devices("sign_ste", ("x", x))
    if clip is not None:
        clip = check_positive("sign_ste", "clip", clip)
        check_fits("sign_ste", "clip", clip, x.dtype)
    return _SignSTEFn.apply(x, clip)


class _RoundSTEFn(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return torch.round(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, grad):
        return grad


@example(lambda: (_x64(4, 5, scale=3.0),), surrogate=lambda x: x, name="round_ste",
         gaps=ESTIMATOR_EXPORT_GAP)
def round_ste(x: torch.Tensor) -> torch.Tensor:
    """``round(x)`` forward (half to even, as ``torch.round``), identity gradient backward.

    Gradient: ``grad`` unchanged (surrogate ``x``). Saves nothing.

    Args:
        x: floating-point tensor.

    Returns:
        Tensor of ``x``'s shape with integral values.

    Raises:
        GradsmithError: if ``x`` is not floating point.

    Example:
        >>> from gradsmith.functional import round_ste
        >>> round_ste(torch.tensor([0.4, 1.5, 2.5, -1.7]))
        tensor([ 0.,  2.,  2., -2.])

    References:
        Bengio, Leonard & Courville, 2013. arXiv:1308.3432.
    """
    check_floating("round_ste", "x", x)
    check_devices("round_ste", ("x", x))
    return _RoundSTEFn.apply(x)


class _GradScaleFn(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x, alpha):
        # A copy, not a view: a custom Function returning a view of its input forbids
        # in-place edits of the result, a surprise for a layer that should act as identity.
        return x.clone()

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.alpha = inputs[1]

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.alpha, None


def _scale_surrogate(x: torch.Tensor, alpha: float) -> torch.Tensor:
    return alpha * x + (1.0 - alpha) * x.detach()


@example(lambda: (_x64(4, 5), 0.25), surrogate=_scale_surrogate, name="grad_scale",
         gaps=ESTIMATOR_EXPORT_GAP)
def grad_scale(x: torch.Tensor, alpha: float) -> torch.Tensor:
    """Identity forward; gradient multiplied by ``alpha`` backward.

    Gradient: ``alpha * grad`` (surrogate ``alpha * x + (1 - alpha) * stop_gradient(x)``).
    Used e.g. for LSQ step-size gradient scaling. Saves nothing.

    Args:
        x: floating-point tensor.
        alpha: finite number (any sign; ``0`` blocks the gradient).

    Returns:
        A copy of ``x``.

    Raises:
        GradsmithError: if ``x`` is not floating point or ``alpha`` is not a finite number.

    Example:
        >>> from gradsmith.functional import grad_scale
        >>> x = torch.ones(3, requires_grad=True)
        >>> grad_scale(x, 0.5).sum().backward()
        >>> x.grad
        tensor([0.5000, 0.5000, 0.5000])
    """
    check_floating("grad_scale", "x", x)
    check_devices("grad_scale", ("x", x))
    alpha = check_number("grad_scale", "alpha", alpha)
    check_fits("grad_scale", "alpha", alpha, x.dtype)
    return _GradScaleFn.apply(x, alpha)


def _reverse_surrogate(x: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
    return _scale_surrogate(x, -alpha)


@example(lambda: (_x64(4, 5), 0.7), surrogate=_reverse_surrogate,
         name="grad_reverse", gaps=ESTIMATOR_EXPORT_GAP)
def grad_reverse(x: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
    """Gradient reversal layer: identity forward, ``-alpha * grad`` backward.

    Gradient: ``-alpha * grad`` (surrogate ``-alpha * x + (1 + alpha) * stop_gradient(x)``).
    Placed between a feature extractor and a domain classifier, it trains the features to
    confuse the classifier (domain-adversarial training). Use :func:`dann_schedule` to ramp
    ``alpha`` from 0 to 1 over training. Saves nothing.

    Args:
        x: floating-point tensor.
        alpha: finite number >= 0 (the reversal already supplies the minus sign).

    Returns:
        A copy of ``x``.

    Raises:
        GradsmithError: if ``x`` is not floating point or ``alpha`` is negative or not finite.

    Example:
        >>> from gradsmith.functional import grad_reverse
        >>> x = torch.ones(2, requires_grad=True)
        >>> grad_reverse(x, alpha=0.5).sum().backward()
        >>> x.grad
        tensor([-0.5000, -0.5000])

    References:
        Ganin & Lempitsky, "Unsupervised Domain Adaptation by Backpropagation", ICML 2015.
        arXiv:1409.7495.
    """
    check_floating("grad_reverse", "x", x)
    check_devices("grad_reverse", ("x", x))
    alpha = check_number("grad_reverse", "alpha", alpha)
    check_fits("grad_reverse", "alpha", alpha, x.dtype)
    if alpha < 0:
        raise GradsmithError(
            f"grad_reverse: alpha must be >= 0, got {alpha}; the layer already negates the "
            f"gradient, so a negative alpha would un-reverse it (use grad_scale(x, {-alpha}) "
            f"if that is what you want)"
        )
    return _GradScaleFn.apply(x, -alpha)
