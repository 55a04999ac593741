"""Backwards that draw random numbers on purpose, and identity forwards whose backward
modifies the gradient (reduced from pytorch-struct's sampling semiring and its sparsemax
helper): undeclared they fail as `undeclared-estimator`; declared (`unbiased=True` on average,
`intended=` draw for draw or as a formula) they pass, or fail when backward does not do what
was declared."""

import torch
import torch.nn.functional as F
from torch.autograd import Function

from corpus import Case
from corpus import randn as _r


def one_hot_sample(logits, count=1):
    """``count`` one-hot draws (summed) from softmax(logits) along the last dim."""
    n = logits.shape[-1]
    draws = torch.multinomial(logits.softmax(-1).reshape(-1, n), count, True)
    return F.one_hot(draws, n).sum(1).reshape(logits.shape).to(logits.dtype)


class SampledLogSumExp(Function):
    """logsumexp whose backward returns a one-hot sample of the softmax: unbiased."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.logsumexp(x, -1)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g.unsqueeze(-1) * one_hot_sample(x)


class SampledTooHot(Function):
    """Samples softmax(2x) instead of softmax(x): biased."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.logsumexp(x, -1)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g.unsqueeze(-1) * one_hot_sample(2 * x)


class SampledCounts(Function):
    """Returns the counts of 4 samples (not their mean): a sampler, 4x the gradient on
    average; declared only by replaying its draws."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.logsumexp(x, -1)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g.unsqueeze(-1) * one_hot_sample(x, 4)


def simplex_tangent(w, g):
    """The sparsemax Jacobian at w (on the simplex) applied to g: masked and centred."""
    m = (w > 0).to(g.dtype)
    return m * (g - (m * g).sum(-1, keepdim=True) / m.sum(-1, keepdim=True).clamp(min=1))


class SparseMaxGrad(Function):
    """Identity forward, backward projects the gradient (a helper for second derivatives)."""

    @staticmethod
    def forward(ctx, w):
        ctx.save_for_backward(w)
        return w.clone()

    @staticmethod
    def backward(ctx, g):
        (w,) = ctx.saved_tensors
        return simplex_tangent(w, g)


class SparseMaxGradNoMask(Function):
    """Centres the gradient but forgets the support mask."""

    @staticmethod
    def forward(ctx, w):
        return w.clone()

    @staticmethod
    def backward(ctx, g):
        return g - g.mean(-1, keepdim=True)


def _simplex(seed):
    w = _r(3, 5, seed=seed).clamp(min=0)
    return w / w.sum(-1, keepdim=True).clamp(min=1e-9)


CASES = [
    Case("sampled-lse-undeclared", SampledLogSumExp, lambda: (_r(3, 4),), False,
         ("undeclared-estimator",)),
    Case("sampled-counts-undeclared", SampledCounts, lambda: (_r(3, 4),), False,
         ("undeclared-estimator",)),
    Case("sampled-lse-declared-unbiased", SampledLogSumExp, lambda: (_r(3, 4),), True,
         ("random-backward",), options={"unbiased": True}),
    Case("sampled-lse-declared-draw-for-draw", SampledLogSumExp, lambda: (_r(3, 4),), True,
         ("random-backward",),
         options={"intended": lambda x, g: g.unsqueeze(-1) * one_hot_sample(x)}),
    Case("sampled-lse-declared-expectation", SampledLogSumExp, lambda: (_r(3, 4),), True,
         options={"unbiased": True, "intended": lambda x, g: g.unsqueeze(-1) * x.softmax(-1)}),
    Case("sampled-too-hot-declared-unbiased", SampledTooHot, lambda: (_r(3, 4),), False,
         ("biased-estimate",), options={"unbiased": True}),
    Case("sampled-counts-declared-unbiased", SampledCounts, lambda: (_r(3, 4),), False,
         ("biased-estimate",), options={"unbiased": True}),
    Case("sparsemax-grad-undeclared", SparseMaxGrad, lambda: (_simplex(1),), False,
         ("undeclared-estimator",)),
    Case("sparsemax-grad-declared", SparseMaxGrad, lambda: (_simplex(1),), True,
         options={"intended": lambda w, g: simplex_tangent(w, g)}),
    Case("sparsemax-grad-forgets-mask", SparseMaxGradNoMask, lambda: (_simplex(2),), False,
         ("intended-mismatch",), options={"intended": lambda w, g: simplex_tangent(w, g)}),
]
