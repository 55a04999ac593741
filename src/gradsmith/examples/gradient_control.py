"""Intentional custom gradients, second derivatives, and randomness in forward.

A Function whose backward is deliberately not the derivative of its forward (stop-gradient,
gradient scaling and reversal, straight-through estimators) would fail a plain gradient
check (as ``undeclared-estimator``). Each one here declares its intent: an *estimator* with
``surrogate=``, a differentiable function whose autograd gradient the backward must
reproduce (straight-through sign: the identity or ``hardtanh``); an *intended modification*
that is the gradient of no function with ``intended=``, what backward must return for given
arguments and incoming gradient (stop-gradient: zeros; scaling and reversal: ``alpha *
grad``). The check then verifies the backward against the declaration, so a wrong estimator
is still caught.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.autograd import Function

from gradsmith._errors import GradsmithError
from gradsmith._example import example
from gradsmith.examples._inputs import randn


@example(lambda: (randn(3, 4),))
class Square(Function):
    """``y = x^2`` with a backward that is itself differentiable.

    Gradient ``dx = 2 x g``, written with differentiable ops on the saved *input*, so
    ``torch.autograd.grad(..., create_graph=True)`` yields the right second derivative
    ``d2y/dx2 = 2``.

    Example:
        >>> x = torch.tensor([3.0], requires_grad=True)
        >>> (g,) = torch.autograd.grad(Square.apply(x), x, create_graph=True)
        >>> torch.autograd.grad(g, x)[0]
        tensor([2.])
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return x * x

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 2 * x * grad


# An estimator's backward is not the gradient of its forward; torch.export keeps the forward only,
# so an exported model trains with the forward's own gradient. A known gap, documented.
_EXPORT_GAP = {"export": "estimator: torch.export keeps the forward only (exported models are for "
                         "inference)"}


@example(lambda: (randn(3, 4),), intended=lambda x, grad: torch.zeros_like(grad),
         gaps=_EXPORT_GAP)
class StopGradient(Function):
    """Identity forward, zero gradient backward (``tf.stop_gradient``; ``x.detach()`` with a
    node in the graph).

    Declared with ``intended=``: the gradient of no function, what backward must return is
    ``zeros_like(grad)``.

    Example:
        >>> x = torch.ones(2, requires_grad=True)
        >>> StopGradient.apply(x).sum().backward()
        >>> x.grad
        tensor([0., 0.])
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return x.clone()

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, grad):
        return torch.zeros_like(grad)


def _scaled(x, alpha, grad):
    return alpha * grad, None


@example(lambda: (randn(3, 4), 0.25), intended=_scaled, name="scale 0.25", gaps=_EXPORT_GAP)
@example(lambda: (randn(3, 4), -1.0), intended=_scaled, name="reversal", gaps=_EXPORT_GAP)
class GradientScale(Function):
    """Identity forward; backward multiplies the gradient by ``alpha`` (``alpha = -1`` is the
    gradient reversal layer of domain-adversarial training).

    Declared with ``intended=``: an intended modification, the gradient of no function;
    backward must return ``(alpha * grad, None)``.

    References:
        Ganin, Lempitsky. Unsupervised Domain Adaptation by Backpropagation. ICML 2015.

    Example:
        >>> x = torch.ones(2, requires_grad=True)
        >>> GradientScale.apply(x, -1.0).sum().backward()
        >>> x.grad
        tensor([-1., -1.])
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(x, alpha):
        if not isinstance(alpha, (int, float)):
            raise GradsmithError(f"GradientScale: alpha must be a Python number, got "
                                 f"{type(alpha).__name__}; pass float(alpha)")
        return x.clone()

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.alpha = float(inputs[1])

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.alpha, None


def _identity(x):
    return x.clone()


@example(lambda: (randn(3, 4),), surrogate=_identity, gaps=_EXPORT_GAP)
class SignSTE(Function):
    """``y = sign(x)`` with the straight-through estimator: backward passes ``g`` unchanged.

    Surrogate: the identity. (Returning zeros, the true derivative of sign, stops learning;
    returning ``g`` without declaring the surrogate is indistinguishable from a bug.)

    References:
        Bengio, Léonard, Courville. Estimating or Propagating Gradients Through Stochastic
        Neurons for Conditional Computation. arXiv:1308.3432, 2013.

    Example:
        >>> SignSTE.apply(torch.tensor([-0.5, 2.0]))
        tensor([-1.,  1.])
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return torch.sign(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, grad):
        return grad.clone()


@example(lambda: (randn(4, 5) * 2,), surrogate=F.hardtanh, gaps=_EXPORT_GAP)
class SignClippedSTE(Function):
    """``y = sign(x)`` with the clipped straight-through estimator: ``dx = g`` where
    ``|x| <= 1``, else 0 (as in binarized neural networks).

    Surrogate: ``hardtanh(x) = clamp(x, -1, 1)``, whose gradient is that mask.

    References:
        Hubara, Courbariaux, Soudry, El-Yaniv, Bengio. Binarized Neural Networks. NeurIPS 2016.

    Example:
        >>> x = torch.tensor([-2.0, 0.5], requires_grad=True)
        >>> SignClippedSTE.apply(x).sum().backward()
        >>> x.grad
        tensor([0., 1.])
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return torch.sign(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * (x.abs() <= 1)


@example(lambda: (randn(4, 6), 0.5))
class GumbelSoftmax(Function):
    """Relaxed one-hot sample: ``y = softmax((logits + G) / tau)`` along the last dim, with
    fresh Gumbel noise ``G = -log(E)``, ``E ~ Exponential(1)``, drawn in forward.

    Gradient: the softmax Jacobian at the *same* noise, from the saved output:
    ``dlogits = y * (g - sum(g * y)) / tau``. Backward must never draw new noise.

    References:
        Jang, Gu, Poole. Categorical Reparameterization with Gumbel-Softmax. ICLR 2017.

    Example:
        >>> y = GumbelSoftmax.apply(torch.zeros(2, 3), 1.0)
        >>> torch.allclose(y.sum(-1), torch.ones(2))
        True
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(logits, tau):
        if not tau > 0:
            raise GradsmithError(f"GumbelSoftmax: tau must be > 0, got {tau!r}")
        gumbel = -torch.empty_like(logits).exponential_().log()
        return torch.softmax((logits + gumbel) / tau, dim=-1)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)
        ctx.tau = float(inputs[1])

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return y * (grad - (grad * y).sum(-1, keepdim=True)) / ctx.tau, None
