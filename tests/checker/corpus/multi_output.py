"""Several outputs, some unused by the loss: backward receives None for them after
ctx.set_materialize_grads(False) (gradcheck's check_undefined_grad)."""

import torch
from torch.autograd import Function

from corpus import Case
from corpus import randn as _r


class ScaledPairNoneUnsafe(Function):
    """(2x, 3x) with unmaterialised grads, backward multiplies None."""

    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x * 2, x * 3

    @staticmethod
    def backward(ctx, g1, g2):
        return g1 * 2 + g2 * 3


class SplitHalvesCat(Function):
    """Splits x in two halves; backward concatenates the incoming gradients (cat of None)."""

    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        a, b = x.chunk(2)
        return a.clone(), b.clone()

    @staticmethod
    def backward(ctx, ga, gb):
        return torch.cat([ga, gb])


class ScaledPairOnesForNone(Function):
    """Replaces a missing gradient by ones instead of zeros: silently wrong."""

    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x * 2, x * 3

    @staticmethod
    def backward(ctx, g1, g2):
        g1 = torch.ones_like(g2) if g1 is None else g1
        g2 = torch.ones_like(g1) if g2 is None else g2
        return g1 * 2 + g2 * 3


class SplitHalvesOnesForNone(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        a, b = x.chunk(2)
        ctx.half = a.numel()
        return a.clone(), b.clone()

    @staticmethod
    def backward(ctx, ga, gb):
        like = ga if ga is not None else gb
        ga = torch.ones(ctx.half, dtype=like.dtype) if ga is None else ga
        gb = torch.ones(ctx.half, dtype=like.dtype) if gb is None else gb
        return torch.cat([ga, gb])


class ScaledPairNoneSafe(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x * 2, x * 3

    @staticmethod
    def backward(ctx, g1, g2):
        gx = None
        if g1 is not None:
            gx = g1 * 2
        if g2 is not None:
            gx = g2 * 3 if gx is None else gx + g2 * 3
        return gx


class SplitHalvesMaterialised(Function):
    """Default materialize_grads: None never reaches backward."""

    @staticmethod
    def forward(ctx, x):
        a, b = x.chunk(2)
        return a.clone(), b.clone()

    @staticmethod
    def backward(ctx, ga, gb):
        return torch.cat([ga, gb])


CASES = [
    Case("two-outputs-none-unsafe", ScaledPairNoneUnsafe, lambda: (_r(4),), False,
         ("undefined-grad-error",)),
    Case("split-cat-of-none", SplitHalvesCat, lambda: (_r(6),), False,
         ("undefined-grad-error",)),
    Case("two-outputs-ones-for-none", ScaledPairOnesForNone, lambda: (_r(4),), False,
         ("undefined-grad-mismatch",)),
    Case("split-ones-for-none", SplitHalvesOnesForNone, lambda: (_r(6),), False,
         ("undefined-grad-mismatch",)),
    Case("two-outputs-none-safe", ScaledPairNoneSafe, lambda: (_r(4),), True),
    Case("split-materialised", SplitHalvesMaterialised, lambda: (_r(6),), True),
]
