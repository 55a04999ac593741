"""Custom Functions as a user would write them, with example inputs registered for gradsmith."""

import torch

import gradsmith


@gradsmith.example(lambda: (torch.randn(4, 5, requires_grad=True),
                            torch.tensor(1.5, requires_grad=True)), name="learnable beta")
class Swish(torch.autograd.Function):
    """f(x) = x * sigmoid(beta * x), with a learnable scalar beta.

    df/dx = s + beta * x * s * (1 - s) and df/dbeta = sum(x^2 * s * (1 - s)), s = sigmoid(beta x).
    The backward is built from differentiable ops on inputs, so second derivatives are right.
    """

    generate_vmap_rule = True  # torch.func.vmap (per-sample gradients) may batch it

    @staticmethod
    def forward(x, beta):
        return x * torch.sigmoid(beta * x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, grad_out):
        x, beta = ctx.saved_tensors
        s = torch.sigmoid(beta * x)
        ds = s * (1 - s)
        grad_x = grad_beta = None
        if ctx.needs_input_grad[0]:
            grad_x = grad_out * (s + beta * x * ds)
        if ctx.needs_input_grad[1]:
            grad_beta = (grad_out * x * x * ds).sum().reshape(beta.shape)
        return grad_x, grad_beta


def _clipped_identity(x, clip):
    """The surrogate: identity inside [-clip, clip], constant outside (its gradient is the STE's)."""
    return x.clamp(-clip, clip)


# An estimator's backward is not the gradient of its forward, and torch.export keeps the forward
# only: declare that known deployment gap (gradsmith then reports it as info, not a warning).
@gradsmith.example(lambda: (torch.randn(64), 1.0), surrogate=_clipped_identity,
                   gaps={"export": "straight-through estimator: an exported model is for "
                                   "inference only"})
class ClippedSignSTE(torch.autograd.Function):
    """Binarise to {-1, +1} in forward; straight-through gradient, zeroed where |x| > clip."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x, clip):
        return torch.where(x >= 0, 1.0, -1.0).to(x.dtype)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, clip = inputs
        ctx.save_for_backward(x.abs() <= clip)

    @staticmethod
    def backward(ctx, grad_out):
        (inside,) = ctx.saved_tensors
        return grad_out * inside, None
