"""Multi-output identity forwards (each output is an input, or a copy of one) whose backward
reroutes or modifies the gradients: estimators of the "rerouting" class (an implicit-function
or stitching trick hands one output's gradient to another input). Undeclared they fail as
`undeclared-estimator`; declared with `intended=` they pass; done right (each output's gradient
back to the input it passes through) they pass undeclared."""

import torch
from torch.autograd import Function

from corpus import Case
from corpus import randn as _r


class PairIdentity(Function):
    """Two pass-throughs, gradients returned where they belong: correct."""

    @staticmethod
    def forward(ctx, a, b):
        return a.clone(), b.clone()

    @staticmethod
    def backward(ctx, ga, gb):
        return ga, gb


class CrossedIdentity(Function):
    """Outputs in the other order (out[0] is b): correct when backward crosses them back."""

    @staticmethod
    def forward(ctx, a, b):
        return b.clone(), a.clone()

    @staticmethod
    def backward(ctx, gb, ga):
        return ga, gb


class SwapGrads(Function):
    """Each input receives the other output's gradient: a pure rerouting."""

    @staticmethod
    def forward(ctx, a, b):
        return a.clone(), b.clone()

    @staticmethod
    def backward(ctx, ga, gb):
        return gb, ga


class TimeIntoState(Function):
    """The shape of an event-time trick: detached (t, y) returned as they are; t gets no
    gradient, its output's gradient is folded into y's (a scalar broadcast over y)."""

    @staticmethod
    def forward(ctx, t, y):
        return t.detach(), y.detach()

    @staticmethod
    def backward(ctx, gt, gy):
        return None, gy + gt


class ReverseBoth(Function):
    """Gradient reversal on two pass-throughs at once, by a forward argument."""

    @staticmethod
    def forward(ctx, x, y, alpha):
        ctx.alpha = alpha
        return x.view_as(x), y.view_as(y)

    @staticmethod
    def backward(ctx, gx, gy):
        return -ctx.alpha * gx, -ctx.alpha * gy, None


class ClipOneOfTwo(Function):
    """Crossed outputs; the gradient of a (out[1]) is clipped, b's passes unchanged."""

    @staticmethod
    def forward(ctx, a, b, bound):
        ctx.bound = bound
        return b.clone(), a.clone()

    @staticmethod
    def backward(ctx, gb, ga):
        return ga.clamp(-ctx.bound, ctx.bound), gb, None


class ImplicitLike(Function):
    """An implicit-function backward through a callable argument (no candidate formula can
    reproduce it: the declaration is a template over the real signature)."""

    @staticmethod
    def forward(ctx, f, t, y):
        ctx.f = f
        ctx.save_for_backward(t, y)
        return t.detach(), y.detach()

    @staticmethod
    def backward(ctx, gt, gy):
        t, y = ctx.saved_tensors
        slope = ctx.f(t, y)
        return None, None, gy - slope * (gt + (gy * slope).sum())


class CopyAndDoubleForgets(Function):
    """Not an identity in x's second output (2x), and backward forgets the 2: a plain bug."""

    @staticmethod
    def forward(ctx, x):
        return x.clone(), 2 * x

    @staticmethod
    def backward(ctx, g1, g2):
        return g1 + g2


def slope(t, y):
    return torch.tanh(y) * t


CASES = [
    Case("pair-identity", PairIdentity, lambda: (_r(4), _r(3, seed=1)), True),
    Case("crossed-identity", CrossedIdentity, lambda: (_r(4), _r(3, seed=1)), True),
    Case("swap-grads-undeclared", SwapGrads, lambda: (_r(2, 3), _r(2, 3, seed=1)), False,
         ("undeclared-estimator",)),
    Case("time-into-state-undeclared", TimeIntoState,
         lambda: (_r((), seed=2), _r(4, seed=1)), False, ("undeclared-estimator",)),
    Case("reverse-both-undeclared", ReverseBoth, lambda: (_r(4), _r(2, 2, seed=1), 0.5),
         False, ("undeclared-estimator",)),
    Case("clip-one-of-two-undeclared", ClipOneOfTwo,
         lambda: (_r(5) * 2, _r(3, seed=1), 0.5), False, ("undeclared-estimator",)),
    Case("implicit-like-undeclared", ImplicitLike, lambda: (slope, _r((), seed=2), _r(4)),
         False, ("undeclared-estimator",)),
    Case("swap-grads-declared-intended", SwapGrads, lambda: (_r(2, 3), _r(2, 3, seed=1)), True,
         options={"intended": lambda a, b, ga, gb: (gb, ga)}),
    Case("implicit-like-declared-intended", ImplicitLike,
         lambda: (slope, _r((), seed=2), _r(4)), True,
         options={"intended": lambda f, t, y, gt, gy: (
             None, None, gy - f(t, y) * (gt + (gy * f(t, y)).sum()))}),
    Case("copy-and-double-forgets", CopyAndDoubleForgets, lambda: (_r(4),), False,
         ("gradient-mismatch",)),
]
