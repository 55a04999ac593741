"""The seed documents' examples, re-typed (not copied) with their behaviour preserved.

Several of the examples the seeds present as correct have real bugs; the verdicts here are
what a careful reviewer finds, and what gradsmith must report.
"""

import torch
import torch.nn.functional as F
from torch.autograd import Function

from corpus import Case
from corpus import randn as _r


class SeedMax(Function):
    """Seed 000 'CustomMax': torch.zeros(shape) without dtype -> float32 gradient."""

    @staticmethod
    def forward(ctx, x, dim, keepdim=False):
        out, idx = x.max(dim=dim, keepdim=keepdim)
        ctx.save_for_backward(idx)
        ctx.shape, ctx.dim, ctx.keepdim = x.shape, dim, keepdim
        return out

    @staticmethod
    def backward(ctx, g):
        (idx,) = ctx.saved_tensors
        grad = torch.zeros(ctx.shape, device=g.device)
        if not ctx.keepdim:
            g, idx = g.unsqueeze(ctx.dim), idx.unsqueeze(ctx.dim)
        grad.scatter_(ctx.dim, idx, g.to(grad.dtype))
        return grad, None, None


class SeedLogSumExp(Function):
    """Seed 000 'LogSumExp': saves the softmax computed in forward -> backward not
    differentiable in x (double backward silently 0)."""

    @staticmethod
    def forward(ctx, x, dim):
        m = x.max(dim=dim, keepdim=True).values
        e = (x - m).exp()
        s = e.sum(dim=dim, keepdim=True)
        ctx.save_for_backward(e / s)
        ctx.dim = dim
        return (s.log() + m).squeeze(dim)

    @staticmethod
    def backward(ctx, g):
        (p,) = ctx.saved_tensors
        return p * g.unsqueeze(ctx.dim), None


class SeedSwish(Function):
    """Seed 000 'SwishFunction': saves sigmoid(beta*x) from forward -> double backward sees
    only part of the second derivative (a warning naming the inputs as partial)."""

    @staticmethod
    def forward(ctx, x, beta):
        s = torch.sigmoid(beta * x)
        ctx.save_for_backward(x, beta, s)
        return x * s

    @staticmethod
    def backward(ctx, g):
        x, beta, s = ctx.saved_tensors
        ds = s * (1 - s)
        gx = g * (s + x * ds * beta) if ctx.needs_input_grad[0] else None
        gb = (g * x * x * ds).sum() if ctx.needs_input_grad[1] else None
        return gx, gb


class SeedFusedLinearReLU(Function):
    """Seed 000 'FusedLinearReLU': right numbers, but the mask lives on ctx as an attribute."""

    @staticmethod
    def forward(ctx, x, w, b):
        z = x @ w.t() + b
        ctx.save_for_backward(x, w, b)
        ctx.mask = z > 0
        return z.clamp(min=0)

    @staticmethod
    def backward(ctx, g):
        x, w, b = ctx.saved_tensors
        gz = g * ctx.mask.float()
        return gz @ w, gz.t() @ x, gz.sum(0)


class SeedSquareBrokenJvp(Function):
    """Seed 000 'DoubleBackwardFunction': declares a jvp whose body is `pass`."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**2

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g

    @staticmethod
    def jvp(ctx, *tangents):
        pass


class SeedHardGumbel(Function):
    """Seed 002 'GumbelSoftmax' (hard): backward passes grad_output through unchanged instead
    of the soft sample's softmax Jacobian it claims to use."""

    @staticmethod
    def forward(ctx, logits, tau):
        noise = -torch.log(-torch.log(torch.rand_like(logits) + 1e-10) + 1e-10)
        soft = torch.softmax((logits + noise) / tau, dim=-1)
        hard = torch.zeros_like(logits).scatter_(-1, soft.argmax(-1, keepdim=True), 1.0)
        return hard - soft.detach() + soft

    @staticmethod
    def backward(ctx, g):
        return g, None


def soft_gumbel(logits, tau):
    noise = -torch.log(-torch.log(torch.rand_like(logits) + 1e-10) + 1e-10)
    return torch.softmax((logits + noise) / tau, dim=-1)


class SeedClippedReLUNoMask(Function):
    """Seed 003 'IncorrectClippedReLU': forgets the mask."""

    @staticmethod
    def forward(ctx, x, clip):
        ctx.clip = float(clip)
        return x.clamp(0, ctx.clip)

    @staticmethod
    def backward(ctx, g):
        return g.clone(), None


class SeedClippedReLU(Function):
    """Seed 002 'ClippedReLU': correct (x == 0 gets 1, a valid subgradient)."""

    @staticmethod
    def forward(ctx, x, clip=6.0):
        ctx.save_for_backward(x)
        ctx.clip = clip
        return x.clamp(0, clip)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        gi = g.clone()
        gi[x < 0] = 0
        gi[x > ctx.clip] = 0
        return gi, None


class SeedSoftThreshold(Function):
    @staticmethod
    def forward(ctx, x, t):
        ctx.save_for_backward(x)
        ctx.t = t
        return x.sign() * (x.abs() - t).relu()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        gi = g.clone()
        gi[x.abs() <= ctx.t] = 0
        return gi, None


class SeedFusedAddReLU(Function):
    @staticmethod
    def forward(ctx, x, y):
        z = x + y
        ctx.save_for_backward(z > 0)
        return z.clamp(min=0)

    @staticmethod
    def backward(ctx, g):
        (mask,) = ctx.saved_tensors
        gi = g * mask.float()
        return gi, gi


class SeedScaledSigmoid(Function):
    """Seed 002 'ScaledSigmoid': saves the output, recovers sigmoid as y / scale."""

    @staticmethod
    def forward(ctx, x, scale):
        y = scale * torch.sigmoid(x)
        ctx.save_for_backward(y)
        ctx.scale = scale
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        s = y / ctx.scale
        return g * ctx.scale * s * (1 - s), None


class SeedWeightedSum(Function):
    @staticmethod
    def forward(ctx, a, b, wa, wb):
        ctx.wa, ctx.wb = wa, wb
        return wa * a + wb * b

    @staticmethod
    def backward(ctx, g):
        return g * ctx.wa, g * ctx.wb, None, None


class SeedConv1d(Function):
    @staticmethod
    def forward(ctx, x, w, b=None, stride=1, padding=0):
        ctx.save_for_backward(x, w, b)
        ctx.stride, ctx.padding = stride, padding
        return F.conv1d(x, w, b, stride, padding)

    @staticmethod
    def backward(ctx, g):
        x, w, b = ctx.saved_tensors
        gx = torch.nn.grad.conv1d_input(x.shape, w, g, ctx.stride, ctx.padding)
        gw = torch.nn.grad.conv1d_weight(x, w.shape, g, ctx.stride, ctx.padding)
        gb = g.sum((0, 2)) if b is not None else None
        return gx, gw, gb, None, None


class SeedSum(Function):
    @staticmethod
    def forward(ctx, x, dim, keepdim=False):
        ctx.shape, ctx.dim, ctx.keepdim = x.shape, dim, keepdim
        return x.sum(dim=dim, keepdim=keepdim)

    @staticmethod
    def backward(ctx, g):
        if not ctx.keepdim:
            g = g.unsqueeze(ctx.dim)
        return g.expand(ctx.shape), None, None


class SeedMean(Function):
    @staticmethod
    def forward(ctx, x, dim, keepdim=False):
        ctx.shape, ctx.dim, ctx.keepdim = x.shape, dim, keepdim
        return x.mean(dim=dim, keepdim=keepdim)

    @staticmethod
    def backward(ctx, g):
        if not ctx.keepdim:
            g = g.unsqueeze(ctx.dim)
        return g.expand(ctx.shape) / ctx.shape[ctx.dim], None, None


class SeedSignSTE(Function):
    @staticmethod
    def forward(ctx, x):
        return torch.sign(x)

    @staticmethod
    def backward(ctx, g):
        return g


class SeedBroadcastMul(Function):
    """Seed 000 'CustomBroadcastOp': general broadcasting reduction for a multiplier."""

    @staticmethod
    def forward(ctx, x, p):
        ctx.save_for_backward(x, p)
        return x * p

    @staticmethod
    def backward(ctx, g):
        x, p = ctx.saved_tensors
        gp = g * x
        lead = gp.dim() - p.dim()
        gp = gp.sum(tuple(range(lead))) if lead else gp
        dims = tuple(i for i, (a, b) in enumerate(zip(gp.shape, p.shape)) if b == 1 and a > 1)
        gp = gp.sum(dims, keepdim=True) if dims else gp
        return g * p, gp


CASES = [
    # right to float32 precision: a precision warning, not a wrong gradient (issue 18)
    Case("seed-max-float32-grad", SeedMax, lambda: (_r(3, 4), 1), True, ("grad-dtype-mismatch",)),
    Case("seed-logsumexp-saved-softmax", SeedLogSumExp, lambda: (_r(3, 4), 1), True,
         ("double-backward-unsupported",)),
    Case("seed-swish-saved-sigmoid", SeedSwish,
         lambda: (_r(5), torch.tensor(1.3, dtype=torch.float64)), True,
         ("double-backward-unsupported",)),
    Case("seed-fused-linear-relu", SeedFusedLinearReLU,
         lambda: (_r(4, 3), _r(5, 3, seed=1), _r(5, seed=2)), True, ("tensor-on-ctx",)),
    Case("seed-square-jvp-pass", SeedSquareBrokenJvp, lambda: (_r(3),), False,
         ("jvp-error", "jvp-mismatch")),
    Case("seed-hard-gumbel", SeedHardGumbel, lambda: (_r(2, 4), 0.5), False,
         ("surrogate-mismatch",), surrogate=soft_gumbel),
    # Forgets the mask: the signature of a straight-through clamp, reported as an estimator
    # that must be declared (the hint also says how to fix it if it is not intended).
    Case("seed-clipped-relu-no-mask", SeedClippedReLUNoMask, lambda: (_r(6) * 2, 1.5), False,
         ("undeclared-estimator", "gradient-mismatch")),
    Case("seed-clipped-relu", SeedClippedReLU,
         lambda: (torch.tensor([-1.0, 0.0, 2.0, 5.0, 6.0, 8.0], dtype=torch.float64), 6.0), True),
    Case("seed-soft-threshold", SeedSoftThreshold, lambda: (_r(7) * 2, 0.5), True),
    Case("seed-fused-add-relu", SeedFusedAddReLU, lambda: (_r(6), _r(6, seed=1)), True),
    Case("seed-scaled-sigmoid", SeedScaledSigmoid, lambda: (_r(5), 3.0), True),
    Case("seed-weighted-sum", SeedWeightedSum, lambda: (_r(2), _r(2, seed=1), 0.3, 0.7), True),
    Case("seed-conv1d", SeedConv1d,
         lambda: (_r(2, 3, 9), _r(4, 3, 3, seed=1), _r(4, seed=2), 2, 1), True),
    Case("seed-sum-dim", SeedSum, lambda: (_r(3, 4), 1), True),
    Case("seed-mean-keepdim", SeedMean, lambda: (_r(3, 4), 0, True), True),
    Case("seed-sign-ste-identity-surrogate", SeedSignSTE, lambda: (_r(6),), True,
         surrogate=lambda x: x * 1.0),
    Case("seed-broadcast-mul", SeedBroadcastMul, lambda: (_r(2, 3, 4), _r(3, 1, seed=1)), True),
]
