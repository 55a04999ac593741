"""Smooth activations: Swish with a learnable beta, scaled sigmoid.

(GELU and SiLU re-implemented builtins; they are teaching examples now:
:mod:`gradsmith.examples.builtins`.)

Each backward recomputes what it needs from saved inputs (or the saved output) with
differentiable torch ops, so second derivatives are exact, not silently zero.
"""

from __future__ import annotations

import torch
from torch import nn

from gradsmith._errors import GradsmithError
from gradsmith._example import example
from gradsmith.ops._common import example_input as _x64
from gradsmith.ops._common import opmath, reduce_to, scalar_or_tensor
from gradsmith.ops._validate import check_devices, check_fits, check_floating, check_number


class _SwishFn(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x, beta):
        return x * torch.sigmoid(beta * x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, beta = inputs
        ctx.beta_is_tensor = isinstance(beta, torch.Tensor)
        if ctx.beta_is_tensor:
            ctx.save_for_backward(x, beta)
        else:
            ctx.save_for_backward(x)
            ctx.beta = beta

    @staticmethod
    def backward(ctx, grad):
        if ctx.beta_is_tensor:
            x, beta = ctx.saved_tensors
        else:
            (x,), beta = ctx.saved_tensors, ctx.beta
        xf = opmath(x)
        s = torch.sigmoid(beta * xf)
        ds = s * (1.0 - s)  # sigmoid'(beta * x)
        grad_x = grad_beta = None
        if ctx.needs_input_grad[0]:
            grad_x = reduce_to(grad * (s + beta * xf * ds), x)
        if ctx.beta_is_tensor and ctx.needs_input_grad[1]:
            grad_beta = reduce_to(grad * xf * xf * ds, beta)
        return grad_x, grad_beta


@example(lambda: (_x64(4, 5), 1.5), name="swish-float-beta")
@example(lambda: (_x64(4, 5).requires_grad_(),
                   torch.tensor(0.8, dtype=torch.float64, requires_grad=True)),
         name="swish-learnable-beta")
def swish(x: torch.Tensor, beta: float | torch.Tensor = 1.0) -> torch.Tensor:
    """Swish: ``x * sigmoid(beta * x)``.

    Gradients, with ``s = sigmoid(beta * x)``: ``dy/dx = s + beta * x * s * (1 - s)`` and
    ``dy/dbeta = x^2 * s * (1 - s)`` (summed to ``beta``'s shape when ``beta`` is broadcast).
    Differentiable backward. Saves ``x`` (and ``beta`` when it is a tensor).

    Args:
        x: floating-point tensor.
        beta: a number, or a floating tensor broadcastable to ``x`` (it may require grad).

    Returns:
        Tensor of ``x``'s shape.

    Raises:
        GradsmithError: if ``x`` is not floating point, ``beta`` is not finite, or ``beta``'s
            shape does not broadcast to ``x``'s.

    Example:
        >>> from gradsmith.functional import swish
        >>> swish(torch.tensor([-1.0, 0.0, 2.0]), beta=2.0)
        tensor([-0.1192,  0.0000,  1.9640])

    References:
        Ramachandran, Zoph & Le, "Searching for Activation Functions", 2017. arXiv:1710.05941.
    """
    check_floating("swish", "x", x)
    beta = scalar_or_tensor("swish", "beta", beta, x)
    check_devices("swish", ("x", x), ("beta", beta))
    if not isinstance(beta, torch.Tensor):
        check_fits("swish", "beta", beta, x.dtype)
    return _SwishFn.apply(x, beta)


class Swish(nn.Module):
    """Swish activation ``x * sigmoid(beta * x)`` with a (by default) learnable scalar beta.

    Args:
        beta: initial value of beta.
        learnable: make ``beta`` an ``nn.Parameter`` (trained with the model); otherwise a
            fixed number.

    Example:
        >>> from gradsmith.nn import Swish
        >>> Swish(beta=1.0, learnable=True)
        Swish(beta=1.0, learnable=True)
    """

    def __init__(self, beta: float = 1.0, learnable: bool = True) -> None:
        super().__init__()
        beta = check_number("Swish", "beta", beta)
        if not isinstance(learnable, bool):
            raise GradsmithError(f"Swish: learnable must be True or False, got {learnable!r}")
        self.learnable = learnable
        if learnable:
            self.beta = nn.Parameter(torch.tensor(beta))
        else:
            self.beta = beta

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return swish(x, self.beta)

    def extra_repr(self) -> str:
        beta = float(self.beta.detach()) if self.learnable else self.beta
        return f"beta={beta}, learnable={self.learnable}"


class _ScaledSigmoidFn(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x, scale):
        return scale * torch.sigmoid(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        # The output, not the input: sigmoid' = s (1 - s) is a function of y = scale * s, and
        # autograd tracks a saved output, so double backward stays exact.
        ctx.save_for_backward(output)
        ctx.scale = inputs[1]

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        yf = opmath(y)
        return (grad * yf * (1.0 - yf / ctx.scale)).to(y.dtype), None


@example(lambda: (_x64(4, 5), 2.5), name="scaled_sigmoid")
def scaled_sigmoid(x: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
    """Scaled sigmoid ``scale * sigmoid(x)``, saving its output instead of its input.

    Gradient: ``scale * s * (1 - s) = y * (1 - y / scale)`` with ``y`` the output; the backward
    is differentiable (the saved output is tracked by autograd).

    Args:
        x: floating-point tensor.
        scale: finite non-zero number.

    Returns:
        Tensor of ``x``'s shape and dtype.

    Raises:
        GradsmithError: if ``x`` is not floating point or ``scale`` is zero or not finite.

    Example:
        >>> from gradsmith.functional import scaled_sigmoid
        >>> scaled_sigmoid(torch.tensor([0.0, 2.0]), scale=2.0)
        tensor([1.0000, 1.7616])
    """
    check_floating("scaled_sigmoid", "x", x)
    check_devices("scaled_sigmoid", ("x", x))
    scale = check_number("scaled_sigmoid", "scale", scale)
    check_fits("scaled_sigmoid", "scale", scale, x.dtype)
    if scale == 0.0:
        raise GradsmithError(
            "scaled_sigmoid: scale must be non-zero, got 0.0 (the output would be identically "
            "zero); pass e.g. scale=1.0"
        )
    return _ScaledSigmoidFn.apply(x, scale)
