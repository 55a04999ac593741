"""The seed tutorials' memory and speed patterns, as a user writes them, for ``gradsmith bench``.

    gradsmith bench benchmarks/tutorial_functions.py --json benchmarks/results/bench_user.json \\
        --markdown benchmarks/results/bench_user.md --plot benchmarks/results/bench_user.png

Each Function registers realistic inputs (1M float32 elements, a 4096 x 1024 layer) and, where
the tutorial names one, the plain code it replaces as ``reference=``; the others are measured
against the autograd of their own forward. The anti-pattern (the activation stashed on ``ctx``)
is here on purpose: it must not measure as a memory win.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

import gradsmith

N = 1 << 20


def _x(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


@gradsmith.example(lambda: (_x(N),))
class MaskReLU(torch.autograd.Function):
    """Save a bool mask (1 byte per element) instead of the input (4 bytes)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x > 0)
        return x.clamp(min=0)

    @staticmethod
    def backward(ctx, grad):
        (mask,) = ctx.saved_tensors
        return grad * mask


@gradsmith.example(lambda: (_x(N),))
class StashedSigmoid(torch.autograd.Function):
    """The anti-pattern: the activation kept as ``ctx.y`` instead of ``save_for_backward``."""

    @staticmethod
    def forward(ctx, x):
        y = torch.sigmoid(x)
        ctx.y = y
        ctx.cache = {"input": x * 1.0}  # a copy "for later", also invisible to hooks
        return y

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.y * (1 - ctx.y)


@gradsmith.example(lambda: (_x(N), _x(N, seed=1)), reference=lambda x, y: torch.relu(x + y))
class FusedAddReLU(torch.autograd.Function):
    """A residual add and ReLU in one node, saving one mask for both inputs."""

    @staticmethod
    def forward(x, y):
        return torch.relu(x + y)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output > 0)

    @staticmethod
    def backward(ctx, grad):
        (mask,) = ctx.saved_tensors
        g = grad * mask
        return g, g


@gradsmith.example(lambda: (_x(4096, 1024), _x(1024, 1024, seed=1) * 0.03, _x(1024, seed=2)),
                   reference=lambda x, w, b: F.relu(F.linear(x, w, b)))
class FusedLinearReLU(torch.autograd.Function):
    """Linear + ReLU saving the mask, not the activation (the input and weight are kept)."""

    @staticmethod
    def forward(x, weight, bias):
        return torch.relu(F.linear(x, weight, bias))

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, weight, _ = inputs
        ctx.save_for_backward(x, weight, output > 0)

    @staticmethod
    def backward(ctx, grad):
        x, weight, mask = ctx.saved_tensors
        g = grad * mask
        return g @ weight, g.t() @ x, g.sum(0)


@gradsmith.example(lambda: (_x(N), 1.5))
class RecomputedSwish(torch.autograd.Function):
    """Recompute sigmoid(beta x) in backward instead of saving it: one saved tensor, not two."""

    @staticmethod
    def forward(ctx, x, beta):
        ctx.save_for_backward(x)
        ctx.beta = beta
        return x * torch.sigmoid(beta * x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(ctx.beta * x)
        return grad * (s + ctx.beta * x * s * (1 - s)), None


@gradsmith.example(lambda: (_x(N), _x(N, seed=1)))
class FrozenScale(torch.autograd.Function):
    """Skip unneeded gradients: only compute what ``needs_input_grad`` asks for."""

    @staticmethod
    def forward(ctx, x, scale):
        ctx.save_for_backward(x, scale)
        return x * scale

    @staticmethod
    def backward(ctx, grad):
        x, scale = ctx.saved_tensors
        gx = grad * scale if ctx.needs_input_grad[0] else None
        gs = grad * x if ctx.needs_input_grad[1] else None
        return gx, gs
