"""Estimators and intended modifications: undeclared ones fail as `undeclared-estimator`;
declared ones (surrogate= for an estimator, intended= for a modification that is the gradient
of no function) pass, or fail when backward does not do what was declared."""

import torch
from torch.autograd import Function

from corpus import Case
from corpus import randn as _r


class RoundSTE(Function):
    @staticmethod
    def forward(ctx, x):
        return x.round()

    @staticmethod
    def backward(ctx, g):
        return g


class SignHardtanhSTE(Function):
    """BinaryConnect's sign with the clipped identity backward."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sign()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (x.abs() <= 1).to(g.dtype)


class ClampSTE(Function):
    @staticmethod
    def forward(ctx, x, lo, hi):
        return x.clamp(lo, hi)

    @staticmethod
    def backward(ctx, g):
        return g, None, None


class FakeQuantSTE(Function):
    """Uniform fake quantization with a fixed scale: straight-through for x."""

    @staticmethod
    def forward(ctx, x, scale, bits):
        q = (x / scale).round().clamp(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
        return q * scale

    @staticmethod
    def backward(ctx, g):
        return g, None, None


class GradReverse(Function):
    """DANN's gradient reversal layer: identity forward, -alpha x grad backward."""

    @staticmethod
    def forward(ctx, x, alpha):
        ctx.alpha = alpha
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return -ctx.alpha * g, None


class GradReverseTensorAlpha(Function):
    """Reversal with alpha passed as a tensor (saved for backward), as some packages do."""

    @staticmethod
    def forward(ctx, x, alpha):
        ctx.save_for_backward(alpha)
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        (alpha,) = ctx.saved_tensors
        return -alpha * g, None


class GradReverseForgetsAlpha(Function):
    @staticmethod
    def forward(ctx, x, alpha):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return -g, None


class GradScale(Function):
    @staticmethod
    def forward(ctx, x, scale):
        ctx.scale = scale
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        return g * ctx.scale, None


class ClipGrad(Function):
    """The tutorials' legitimate example: identity forward, backward clips its gradient."""

    @staticmethod
    def forward(ctx, x, bound):
        ctx.bound = bound
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        return g.clamp(-ctx.bound, ctx.bound), None


class ClipGradWrongBound(Function):
    @staticmethod
    def forward(ctx, x, bound):
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        return g.clamp(-1.0, 1.0), None


class TopKGrad(Function):
    """Sparsified gradient: only the k largest magnitudes pass."""

    @staticmethod
    def forward(ctx, x, k):
        ctx.k = k
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        return topk_mask(g, ctx.k), None


def topk_mask(g, k):
    keep = g.abs().reshape(-1).topk(k).indices
    mask = torch.zeros(g.numel(), dtype=g.dtype)
    mask[keep] = 1
    return g * mask.reshape(g.shape)


class NoisyGrad(Function):
    """Gradient noise drawn at backward time (differential-privacy style)."""

    @staticmethod
    def forward(ctx, x, sigma):
        ctx.sigma = sigma
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        return g + ctx.sigma * torch.randn_like(g), None


class SoftSignSTE(Function):
    """sign forward, tanh' backward recomputed from the saved input: second order right."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sign()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (1 - torch.tanh(x) ** 2)


class SoftSignSTESavedDerivative(Function):
    """Same first order, but tanh' computed in forward and saved: the derivative of backward
    ignores x, which the surrogate's second derivative exposes."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(1 - torch.tanh(x) ** 2)
        return x.sign()

    @staticmethod
    def backward(ctx, g):
        (d,) = ctx.saved_tensors
        return g * d


CASES = [
    Case("round-ste-undeclared", RoundSTE, lambda: (_r(6) * 3,), False, ("undeclared-estimator",)),
    Case("sign-hardtanh-ste-undeclared", SignHardtanhSTE, lambda: (_r(8) * 2,), False,
         ("undeclared-estimator",)),
    Case("clamp-ste-undeclared", ClampSTE, lambda: (_r(8) * 2, -1.0, 1.0), False,
         ("undeclared-estimator",)),
    Case("fake-quant-ste-undeclared", FakeQuantSTE, lambda: (_r(6), 0.1, 8), False,
         ("undeclared-estimator",)),
    Case("grad-reverse-undeclared", GradReverse, lambda: (_r(5), 0.5), False,
         ("undeclared-estimator",)),
    Case("grad-reverse-tensor-alpha-undeclared", GradReverseTensorAlpha,
         lambda: (_r(5), torch.tensor(0.3, dtype=torch.float64)), False,
         ("undeclared-estimator",)),
    Case("grad-scale-undeclared", GradScale, lambda: (_r(2, 3), 3.0), False,
         ("undeclared-estimator",)),
    Case("round-ste-declared", RoundSTE, lambda: (_r(6) * 3,), True, surrogate=lambda x: x),
    Case("fake-quant-ste-declared", FakeQuantSTE, lambda: (_r(6), 0.1, 8), True,
         surrogate=lambda x, scale, bits: x),
    Case("grad-reverse-declared-intended", GradReverse, lambda: (_r(5), 0.5), True,
         options={"intended": lambda x, alpha, grad: (-alpha * grad, None)}),
    Case("grad-scale-declared-intended", GradScale, lambda: (_r(2, 3), 3.0), True,
         options={"intended": lambda x, scale, grad: (scale * grad, None)}),
    Case("clip-grad-declared-intended", ClipGrad, lambda: (_r(8), 0.5), True,
         options={"intended": lambda x, bound, grad: (grad.clamp(-bound, bound), None)}),
    Case("topk-grad-declared-intended", TopKGrad, lambda: (_r(10), 3), True,
         options={"intended": lambda x, k, grad: (topk_mask(grad, k), None)}),
    Case("noisy-grad-declared-intended", NoisyGrad, lambda: (_r(6), 0.1), True,
         ("random-backward",),
         options={"intended": lambda x, sigma, grad: (grad + sigma * torch.randn_like(grad),
                                                      None)}),
    Case("soft-sign-ste-declared", SoftSignSTE, lambda: (_r(6),), True, surrogate=torch.tanh),
    Case("grad-reverse-forgets-alpha", GradReverseForgetsAlpha, lambda: (_r(5), 0.5), False,
         ("intended-mismatch",),
         options={"intended": lambda x, alpha, grad: (-alpha * grad, None)}),
    Case("clip-grad-wrong-bound", ClipGradWrongBound, lambda: (_r(8) * 2, 0.5), False,
         ("intended-mismatch",),
         options={"intended": lambda x, bound, grad: (grad.clamp(-bound, bound), None)}),
    Case("intended-wrong-count", ClipGrad, lambda: (_r(4), 0.5), False, ("intended-error",),
         options={"intended": lambda x, bound, grad: grad.clamp(-bound, bound)}),
    Case("intended-wrong-shape", ClipGrad, lambda: (_r(4), 0.5), False, ("intended-error",),
         options={"intended": lambda x, bound, grad: (grad.sum(), None)}),
    Case("soft-sign-ste-saved-derivative", SoftSignSTESavedDerivative, lambda: (_r(6),), True,
         ("double-backward-unsupported",), surrogate=torch.tanh),
]
