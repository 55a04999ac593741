"""Wrong structure of backward's result, and code that crashes."""

import torch
from torch.autograd import Function

from corpus import Case
from corpus import randn as _r


class ScaleMissingNone(Function):
    """Seed 000 'NotEnoughReturns': no None for the float argument."""

    @staticmethod
    def forward(ctx, x, alpha):
        ctx.alpha = alpha
        return x * alpha

    @staticmethod
    def backward(ctx, g):
        return g * ctx.alpha


class MulOneGrad(Function):
    """Two tensor inputs, one gradient returned."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return (g * b,)


class GradForInt(Function):
    """Returns a tensor for an int argument."""

    @staticmethod
    def forward(ctx, x, k):
        ctx.k = k
        return x * k

    @staticmethod
    def backward(ctx, g):
        return g * ctx.k, torch.zeros(())


class BiasNotReduced(Function):
    """Bias gradient left at the output's (broadcast) shape: legal, autograd sums it down
    (gradcheck passes it), only memory is wasted: a warning."""

    @staticmethod
    def forward(ctx, x, bias):
        return x + bias

    @staticmethod
    def backward(ctx, g):
        return g, g


class ColumnGrad(Function):
    """Gradient shaped (n, 1) for an input of shape (n,)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 3

    @staticmethod
    def backward(ctx, g):
        return (3 * g).unsqueeze(1)


class PerRowWeightGrad(Function):
    """``y[i] = sum_j x[i, j] w[j]`` with the weight gradient left per row, shape (n, d) for a
    (d,) weight: legal broadcast shape (autograd sums the rows), a warning."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return (x * w).sum(-1)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g.unsqueeze(-1) * w, g.unsqueeze(-1) * x


class TransposedGrad(Function):
    """Gradient transposed, (4, 3) for a (3, 4) input: autograd rejects it."""

    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return (2 * g).t()


class HalfPrecisionGrad(Function):
    """Computes the gradient in float32 whatever the input dtype."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return (x.cos() * g).float()


class ZerosWithoutDtype(Function):
    """Builds the gradient with torch.zeros(shape): default float32."""

    @staticmethod
    def forward(ctx, x):
        ctx.shape = x.shape
        return x.sum()

    @staticmethod
    def backward(ctx, g):
        return torch.zeros(ctx.shape) + g


class BackwardShapeCrash(Function):
    """Backward multiplies incompatible shapes."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a @ b

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return g @ b, g @ a


class ForwardNeedsSquare(Function):
    """Forward crashes on the example inputs."""

    @staticmethod
    def forward(ctx, x):
        return torch.linalg.inv(x) @ x.t()

    @staticmethod
    def backward(ctx, g):
        return g


class ForwardDetached(Function):
    """Marks its only output non-differentiable: nothing to check."""

    @staticmethod
    def forward(ctx, x):
        out = x.round()
        ctx.mark_non_differentiable(out)
        return out

    @staticmethod
    def backward(ctx, g):
        return g


CASES = [
    Case("scale-missing-none", ScaleMissingNone, lambda: (_r(4), 2.0), False,
         ("wrong-grad-count",)),
    Case("mul-one-grad", MulOneGrad, lambda: (_r(3), _r(3, seed=1)), False,
         ("wrong-grad-count",)),
    Case("grad-for-int", GradForInt, lambda: (_r(3), 3), False, ("non-tensor-grad",)),
    Case("bias-not-reduced", BiasNotReduced, lambda: (_r(4, 3), _r(3, seed=1)), True,
         ("broadcast-grad",)),
    Case("per-row-weight-grad", PerRowWeightGrad, lambda: (_r(4, 3), _r(3, seed=1)), True,
         ("broadcast-grad",)),
    Case("column-grad", ColumnGrad, lambda: (_r(4),), False, ("grad-shape-mismatch",)),
    Case("transposed-grad", TransposedGrad, lambda: (_r(3, 4),), False,
         ("grad-shape-mismatch",)),
    # A float32 gradient for a float64 input is right to float32 precision: a precision
    # warning, not a wrong gradient (issue 18).
    Case("float32-grad-for-float64", HalfPrecisionGrad, lambda: (_r(5),), True,
         ("grad-dtype-mismatch",)),
    Case("zeros-without-dtype", ZerosWithoutDtype, lambda: (_r(2, 3),), True,
         ("grad-dtype-mismatch",)),
    Case("backward-shape-crash", BackwardShapeCrash, lambda: (_r(2, 3), _r(3, 4, seed=1)),
         False, ("backward-error",)),
    Case("forward-crash", ForwardNeedsSquare, lambda: (_r(2, 3),), False, ("forward-error",)),
    Case("no-differentiable-output", ForwardDetached, lambda: (_r(3),), False,
         ("no-gradient-path",)),
]
