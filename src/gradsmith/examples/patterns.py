"""Smaller seed patterns: branches, smooth approximations, scale factors, external code.

- Branches: compute both sides with ``torch.where`` instead of writing into a zeros tensor
  through boolean indexing; the backward follows the same condition.
- A hand-derived gradient must keep every constant factor of the chain rule (the smooth
  round's ``1/2``).
- Never divide by a hyperparameter to recover an intermediate (``y / scale`` fails at
  ``scale = 0``); recompute it from the saved input instead.
- Gradients from outside PyTorch (NumPy, a C library, finite differences) are not
  differentiable: mark the backward ``@once_differentiable``, and check with
  ``approximate=True``, which judges their quality (relative error, cosine) instead of exactness.
"""

from __future__ import annotations

import math

import torch
from torch.autograd import Function
from torch.autograd.function import once_differentiable

from gradsmith._errors import GradsmithError
from gradsmith._example import example
from gradsmith.examples._inputs import randn


@example(lambda: (randn(4, 5),))
class ConditionalScale(Function):
    """``y = 2x`` where ``x > 0``, ``y = x / 2`` elsewhere (a leaky, asymmetric slope).

    Gradient: ``dx = 2g`` where ``x > 0``, else ``g / 2``; the kink at 0 has the one-sided
    slopes 1/2 and 2.

    Example:
        >>> ConditionalScale.apply(torch.tensor([-2.0, 3.0]))
        tensor([-1.,  6.])
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return torch.where(x > 0, 2 * x, 0.5 * x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return torch.where(x > 0, 2 * grad, 0.5 * grad)


@example(lambda: (randn(4, 5) * 0.5 + 0.5, 10.0), name="alpha 10")
@example(lambda: (randn(6) + 0.5, 2.0), name="alpha 2")
class SmoothRound(Function):
    """A differentiable step around 0.5: ``y = 1/2 + 1/2 tanh(alpha (x - 1/2))``; larger
    ``alpha`` is closer to rounding ``x`` in ``[0, 1]``.

    Gradient: ``dx = g * alpha / 2 * (1 - tanh(alpha (x - 1/2))^2)``; the factor ``1/2``
    of the forward's ``1/2 tanh`` is the one commonly lost.

    Example:
        >>> SmoothRound.apply(torch.tensor([0.5]), 10.0)
        tensor([0.5000])
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(x, alpha=10.0):
        if not alpha > 0:
            raise GradsmithError(f"SmoothRound: alpha must be > 0, got {alpha!r}")
        return 0.5 + 0.5 * torch.tanh(alpha * (x - 0.5))

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])
        ctx.alpha = float(inputs[1])

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        t = torch.tanh(ctx.alpha * (x - 0.5))
        return grad * 0.5 * ctx.alpha * (1 - t * t), None


@example(lambda: (randn(3, 4), 3.0), name="scale 3")
# A negative scale, not 0: at scale 0 forward is constant and backward 0, a row that compares
# zeros with zeros (INCOMPLETE); tests/examples pins that backward stays finite there.
@example(lambda: (randn(3, 4), -2.0), name="scale -2")
class ScaledSigmoid(Function):
    """``y = scale * sigmoid(x)`` for a fixed Python number ``scale`` (any sign, even 0).

    Gradient: ``dx = g * scale * s * (1 - s)`` with ``s = sigmoid(x)`` recomputed from the
    saved input; recovering ``s`` as ``y / scale`` would divide by zero at ``scale = 0``.

    Example:
        >>> ScaledSigmoid.apply(torch.zeros(2), 4.0)
        tensor([2., 2.])
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(x, scale):
        return scale * torch.sigmoid(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])
        ctx.scale = float(inputs[1])

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(x)
        return grad * ctx.scale * s * (1 - s), None


def _external_forward(values: list[float]) -> list[float]:
    """Stands in for a C or NumPy library: tanh, computed outside PyTorch on plain floats.

    Plain Python rather than NumPy, so the embedded default runs on a plain install (NumPy is
    not a gradsmith dependency, and torch does not require it).
    """
    return [math.tanh(v) for v in values]


def _external_gradient(values: list[float], upstream: list[float], eps: float = 1e-3):
    """The library's own gradient: central finite differences, accurate to O(eps^2)."""
    plus = _external_forward([v + eps for v in values])
    minus = _external_forward([v - eps for v in values])
    return [(p - m) / (2 * eps) * u for p, m, u in zip(plus, minus, upstream)]


@example(lambda: (randn(4, 5),), approximate=True,
         gaps={"compile": "calls external code: Dynamo graph-breaks around it",
               "export": "calls external code: torch.export cannot trace it",
               "torch.func": "calls external code on the tensors: torch.func cannot"})
class ExternalTanh(Function):
    """``y = tanh(x)`` computed by external (non-PyTorch) code, with the library's approximate
    gradient (central differences, relative error about ``eps^2 = 1e-6``).

    The backward leaves PyTorch, so it is ``@once_differentiable`` (second derivatives are
    refused loudly rather than silently zero), and the registered example uses
    ``approximate=True``: the check reports the gradient's relative error and cosine
    similarity instead of failing on the approximation.

    Example:
        >>> ExternalTanh.apply(torch.zeros(2, dtype=torch.float64))
        tensor([0., 0.], dtype=torch.float64)
    """

    @staticmethod
    def forward(x):
        values = x.detach().cpu().flatten().tolist()  # noqa: GS305 (the point: code outside torch)
        return torch.tensor(_external_forward(values), dtype=x.dtype,
                            device=x.device).reshape(x.shape)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        upstream = grad.detach().cpu().flatten().tolist()  # noqa: GS303 (the library runs on the host)
        values = x.cpu().flatten().tolist()  # noqa: GS303
        return torch.tensor(_external_gradient(values, upstream), dtype=grad.dtype,
                            device=grad.device).reshape(x.shape)
