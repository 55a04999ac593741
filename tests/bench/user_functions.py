"""The tutorials' patterns as a user would write them, for ``gradsmith bench FILE::Fn`` tests.

Not collected by pytest (no ``test_`` prefix); imported by path, like a user's file.
"""

from __future__ import annotations

import numpy as np
import torch

import gradsmith

N = 4096


@gradsmith.example(lambda: (torch.randn(N),))
class MaskReLU(torch.autograd.Function):
    """Classic style: saves a bool mask (1 byte per element) instead of the input."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x > 0)
        return x.clamp(min=0)

    @staticmethod
    def backward(ctx, g):
        (m,) = ctx.saved_tensors
        return g * m


@gradsmith.example(lambda: (torch.randn(N),))
class StashSigmoid(torch.autograd.Function):
    """The anti-pattern: the activation stashed on ctx."""

    @staticmethod
    def forward(ctx, x):
        y = torch.sigmoid(x)
        ctx.y = y
        return y

    @staticmethod
    def backward(ctx, g):
        return g * ctx.y * (1 - ctx.y)


class FusedAddReLU(torch.autograd.Function):
    """Modern style, no example: inputs are synthesised."""

    @staticmethod
    def forward(x, y):
        return torch.relu(x + y)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output > 0)

    @staticmethod
    def backward(ctx, g):
        (m,) = ctx.saved_tensors
        g = g * m
        return g, g


def relu_of_sum(x, y):
    return torch.relu(x + y)


@gradsmith.example(lambda: (torch.randn(N), torch.randn(N)), reference=relu_of_sum)
class FusedAddReLURegistered(FusedAddReLU):
    """The same, with the plain code it replaces registered as its reference."""


def clip_surrogate(x):
    return x.clamp(-1, 1)


@gradsmith.example(lambda: (torch.randn(N),), surrogate=clip_surrogate)
class SignSTE(torch.autograd.Function):
    """An estimator: the autograd of sign() is zero, its declared surrogate is the reference."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.sign(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (x.abs() <= 1)


@gradsmith.example(lambda: (torch.randn(N),))
class SignSTENoSurrogate(SignSTE):
    """The same estimator without a surrogate: measured against autograd, with a note."""


@gradsmith.example(lambda: (torch.randn(64, dtype=torch.float64),))
class NumpyTanh(torch.autograd.Function):
    """External code: the forward is not differentiable as ordinary ops, no reference."""

    @staticmethod
    def forward(ctx, x):
        y = torch.from_numpy(np.tanh(x.detach().numpy()))
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * (1 - y * y)


@gradsmith.example(lambda: (torch.randn(8),))
class Broken(torch.autograd.Function):
    """Its forward raises: one row with the error."""

    @staticmethod
    def forward(ctx, x):
        raise RuntimeError("boom in forward")

    @staticmethod
    def backward(ctx, g):
        return g
