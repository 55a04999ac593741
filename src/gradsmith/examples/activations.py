"""Elementwise activations and fused ops: what to save for backward, and why.

- Save the output when the derivative is a function of it (exp, sigmoid, tanh): no
  recomputation, and second derivatives stay right because the output is tracked by autograd.
- Save the input when the derivative needs it (clipped ReLU, swish, soft threshold).
- A boolean mask is the cheapest thing to save for piecewise-linear functions (1 byte per
  element); it goes through ``save_for_backward`` like any tensor, never onto ``ctx`` directly.
- Multiply by a boolean mask, never by ``mask.float()``: that would hand a float32 gradient to
  a float64 input.
"""

from __future__ import annotations

import torch
from torch.autograd import Function

from gradsmith._errors import GradsmithError
from gradsmith._example import example
from gradsmith.examples._inputs import randn


@example(lambda: (randn(3, 4),))
class Exp(Function):  # noqa: GS302
    """``y = exp(x)``; gradient ``dx = g * y`` from the saved output.

    Example:
        >>> Exp.apply(torch.zeros(2))
        tensor([1., 1.])
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return x.exp()

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * y


@example(lambda: (randn(3, 4),), name="float64")
@example(lambda: (randn(3, 4, dtype=torch.float32),), name="float32")
class Sigmoid(Function):  # noqa: GS302
    """``y = 1 / (1 + exp(-x))``; gradient ``dx = g * y * (1 - y)`` from the saved output.

    Example:
        >>> Sigmoid.apply(torch.zeros(1))
        tensor([0.5000])
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return torch.sigmoid(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * y * (1 - y)


@example(lambda: (randn(3, 4),))
class Tanh(Function):  # noqa: GS302
    """``y = tanh(x)``; gradient ``dx = g * (1 - y^2)`` from the saved output.

    Example:
        >>> Tanh.apply(torch.zeros(1))
        tensor([0.])
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return torch.tanh(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * (1 - y * y)


@example(lambda: (randn(4, 5) * 4, 6.0), name="clip 6")
@example(lambda: (randn(4, 5), 0.5), name="clip 0.5")
class ClippedReLU(Function):
    """``y = min(max(x, 0), clip_val)`` for a fixed ``clip_val > 0`` (ReLU6 for 6).

    Gradient: ``dx = g`` where ``0 < x < clip_val``, else 0; ``None`` for ``clip_val``, a
    hyperparameter. The mask is computed without in-place writes into a cloned gradient, so
    the backward stays differentiable.

    Example:
        >>> ClippedReLU.apply(torch.tensor([-1., 2., 8.]), 6.0)
        tensor([0., 2., 6.])
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(x, clip_val=6.0):
        if not clip_val > 0:
            raise GradsmithError(f"ClippedReLU: clip_val must be > 0, got {clip_val!r}")
        return x.clamp(min=0, max=clip_val)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, clip_val = inputs
        ctx.save_for_backward(x)
        ctx.clip_val = float(clip_val)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * ((x > 0) & (x < ctx.clip_val)), None


@example(lambda: (randn(4, 5), torch.tensor(1.5, dtype=torch.float64, requires_grad=True)),
         name="scalar beta")
@example(lambda: (randn(4, 5), randn(5, seed=3)), name="per-feature beta")
class Swish(Function):
    """Swish with a learnable ``beta``: ``y = x * s`` with ``s = sigmoid(beta * x)``.

    Gradients: ``dx = g * (s + beta * x * s * (1 - s))`` and
    ``dbeta = sum of g * x^2 * s * (1 - s)`` over the dims ``beta`` was broadcast along.

    References:
        Ramachandran, Zoph, Le. Searching for Activation Functions. arXiv:1710.05941, 2017.

    Example:
        >>> Swish.apply(torch.zeros(2), torch.tensor(1.0))
        tensor([0., 0.])
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(x, beta):
        return x * torch.sigmoid(beta * x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, grad):
        x, beta = ctx.saved_tensors
        s = torch.sigmoid(beta * x)
        ds = s * (1 - s)
        grad_x = grad * (s + beta * x * ds) if ctx.needs_input_grad[0] else None
        grad_beta = (grad * x * x * ds).sum_to_size(beta.shape) if ctx.needs_input_grad[1] \
            else None
        return grad_x, grad_beta


@example(lambda: (randn(4, 5), 0.5))
class SoftThreshold(Function):
    """Soft thresholding (the proximal operator of the L1 norm):
    ``y = sign(x) * max(|x| - t, 0)`` for a fixed threshold ``t >= 0``.

    Gradient: ``dx = g`` where ``|x| > t``, else 0; ``None`` for ``t``.

    Example:
        >>> SoftThreshold.apply(torch.tensor([-2., 0.1, 3.]), 1.0)
        tensor([-1.,  0.,  2.])
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(x, threshold):
        if not threshold >= 0:
            raise GradsmithError(f"SoftThreshold: threshold must be >= 0, got {threshold!r}")
        return torch.sign(x) * torch.relu(x.abs() - threshold)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, threshold = inputs
        ctx.save_for_backward(x)
        ctx.threshold = float(threshold)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * (x.abs() > ctx.threshold), None


@example(lambda: (randn(3, 4), randn(3, 4, seed=1)))
class FusedAddReLU(Function):
    """``y = relu(a + b)`` in one op, saving only a boolean mask.

    Gradients: ``da = db = g * (a + b > 0)``.

    Example:
        >>> FusedAddReLU.apply(torch.tensor([1., -2.]), torch.tensor([1., 1.]))
        tensor([2., 0.])
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(a, b):
        return torch.relu(a + b)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output > 0)

    @staticmethod
    def backward(ctx, grad):
        (mask,) = ctx.saved_tensors
        grad = grad * mask
        return grad, grad


@example(lambda: (randn(6, 4), randn(5, 4, seed=1), randn(5, seed=2)), name="with bias")
@example(lambda: (randn(6, 4), randn(5, 4, seed=1), None), name="no bias")
class FusedLinearReLU(Function):
    """``y = relu(x W^T + b)``, saving ``x``, ``W`` and a boolean mask, not the pre-activation.

    Gradients, with ``h = g * mask``: ``dx = h W``, ``dW = h^T x``, ``db = sum_rows h``.

    Example:
        >>> FusedLinearReLU.apply(torch.ones(1, 2), -torch.ones(1, 2), None)
        tensor([[0.]])
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(input, weight, bias=None):
        pre = input @ weight.mT
        if bias is not None:
            pre = pre + bias
        return torch.relu(pre)

    @staticmethod
    def setup_context(ctx, inputs, output):
        input, weight, bias = inputs
        ctx.save_for_backward(input, weight, output > 0)
        ctx.has_bias = bias is not None

    @staticmethod
    def backward(ctx, grad):
        input, weight, mask = ctx.saved_tensors
        h = grad.to(weight.dtype) * mask  # bfloat16 under autocast: see examples.linear.Linear
        grad_input = h @ weight if ctx.needs_input_grad[0] else None
        grad_weight = h.mT @ input if ctx.needs_input_grad[1] else None
        grad_bias = h.sum(0) if ctx.has_bias and ctx.needs_input_grad[2] else None
        return grad_input, grad_weight, grad_bias
