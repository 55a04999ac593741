"""Side effects and state: mutation, layout assumptions, nondeterminism, noise, hygiene."""

import torch
from torch.autograd import Function

from corpus import Case
from corpus import randn as _r


class ReluInplaceNoDirty(Function):
    """relu_ on the input without mark_dirty."""

    @staticmethod
    def forward(ctx, x):
        out = x.relu_()
        ctx.save_for_backward(out)
        return out.clone()

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        return g * (out > 0)


class NormalizeInplace(Function):
    """Normalises the input in place, returns a copy."""

    @staticmethod
    def forward(ctx, x):
        x.div_(2)
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g


class ReluMasksGradOutput(Function):
    """Seed 000 'ModifyGradOutput': grad_output[x < 0] = 0 in place."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clamp(min=0)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        g[x < 0] = 0
        return g


class ScaleMulGradInplace(Function):
    @staticmethod
    def forward(ctx, x):
        return x * 3

    @staticmethod
    def backward(ctx, g):
        return g.mul_(3)


class SigmoidMutatesSaved(Function):
    """Computes y*(1-y) in place on the saved output: the user's output changes."""

    @staticmethod
    def forward(ctx, x):
        y = torch.sigmoid(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y.mul_(1 - y)


class ExpMutatesSavedInput(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.exp()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x.exp_()


class RowSumViewGrad(Function):
    """backward calls .view on grad_output: breaks for non-contiguous incoming gradients."""

    @staticmethod
    def forward(ctx, x):
        ctx.shape = x.shape
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return (g.view(-1) * 2).view(ctx.shape)


class StridesAssumed(Function):
    """Forward reads the input through as_strided assuming a contiguous layout."""

    @staticmethod
    def forward(ctx, x):
        flat = torch.as_strided(x, (x.numel(),), (1,))
        return (flat * 2).reshape(x.shape)

    @staticmethod
    def backward(ctx, g):
        return g * 2


class FlattenWithView(Function):
    """forward calls x.view(-1): raises for transposed inputs."""

    @staticmethod
    def forward(ctx, x):
        ctx.shape = x.shape
        return (x.view(-1) * 3).view(x.shape)

    @staticmethod
    def backward(ctx, g):
        return g * 3


class CountingBackward(Function):
    """Scales the gradient by how many times backward ran (state on the class)."""

    calls = 0

    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        CountingBackward.calls += 1
        return g * 2 * (1 + 1e-3 * CountingBackward.calls)


class DropoutRedrawsMask(Function):
    """Dropout whose backward draws a new mask instead of reusing forward's."""

    @staticmethod
    def forward(ctx, x):
        mask = (torch.rand_like(x) > 0.5).to(x.dtype)
        return x * mask * 2

    @staticmethod
    def backward(ctx, g):
        mask = (torch.rand_like(g) > 0.5).to(g.dtype)
        return g * mask * 2


class NoisyScaleRedraws(Function):
    """Multiplicative Gaussian noise redrawn in backward."""

    @staticmethod
    def forward(ctx, x):
        return x * (1 + 0.1 * torch.randn_like(x))

    @staticmethod
    def backward(ctx, g):
        return g * (1 + 0.1 * torch.randn_like(g))


class TanhOnCtx(Function):
    """Correct numbers, but the output is stored as a ctx attribute."""

    @staticmethod
    def forward(ctx, x):
        y = torch.tanh(x)
        ctx.y = y
        return y

    @staticmethod
    def backward(ctx, g):
        return g * (1 - ctx.y**2)


_CACHE = []


class CachesCtx(Function):
    """Keeps every ctx in a module-level list (a 'debug cache'): leaks."""

    @staticmethod
    def forward(ctx, x):
        _CACHE.append(ctx)
        del _CACHE[:-4]
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


class MulAlwaysBoth(Function):
    """Computes both gradients even when only one is needed."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return g * b, g * a


CASES = [
    Case("relu-inplace-no-dirty", ReluInplaceNoDirty, lambda: (_r(5),), False, ("input-mutated",)),
    Case("normalize-inplace", NormalizeInplace, lambda: (_r(5),), False, ("input-mutated",)),
    Case("relu-masks-grad-output", ReluMasksGradOutput, lambda: (_r(6),), False,
         ("grad-output-mutated",)),
    Case("scale-mul-grad-inplace", ScaleMulGradInplace, lambda: (_r(6),), False,
         ("grad-output-mutated",)),
    Case("sigmoid-mutates-saved-output", SigmoidMutatesSaved, lambda: (_r(6),), False,
         ("saved-tensor-mutated",)),
    Case("exp-mutates-saved-input", ExpMutatesSavedInput, lambda: (_r(6),), False,
         ("input-mutated-in-backward", "saved-tensor-mutated")),
    Case("view-on-grad-output", RowSumViewGrad, lambda: (_r(3, 4),), False,
         ("noncontiguous-mismatch",)),
    Case("as-strided-assumes-contiguous", StridesAssumed, lambda: (_r(3, 4),), False,
         ("noncontiguous-mismatch",)),
    # forward raising on a transposed input fails at the caller's own call: a warning (issue 18)
    Case("view-on-input", FlattenWithView, lambda: (_r(3, 4),), True,
         ("noncontiguous-mismatch",)),
    Case("counting-backward", CountingBackward, lambda: (_r(4),), False,
         ("nondeterministic-backward",)),
    Case("dropout-redraws-mask", DropoutRedrawsMask, lambda: (_r(8),), False,
         ("fresh-noise-in-backward",)),
    Case("noise-redrawn", NoisyScaleRedraws, lambda: (_r(8),), False,
         ("fresh-noise-in-backward",)),
    Case("tanh-output-on-ctx", TanhOnCtx, lambda: (_r(5),), True, ("tensor-on-ctx",)),
    Case("caches-ctx", CachesCtx, lambda: (_r(5),), True, ("ctx-leak",)),
    Case("mul-always-both", MulAlwaysBoth, lambda: (_r(3), _r(3, seed=1)), True,
         ("unneeded-grad",)),
]
