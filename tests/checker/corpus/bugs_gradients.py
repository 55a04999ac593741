"""Wrong numbers: first and second derivatives, NaN, jvp, vmap, surrogate mismatches."""

import torch
from torch.autograd import Function

from corpus import Case
from corpus import randn as _r


class ExpDoubled(Function):
    """Seed 001's 'modified derivative': 2*exp(x) for exp(x)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.exp()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x.exp() * g


class MatmulTransposed(Function):
    """grad_a = g @ b instead of g @ b.T (square shapes hide the error from shape checks)."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a @ b

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return g @ b, a.t() @ g


class NoChainRule(Function):
    """Forgets to multiply by grad_output."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.tanh(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 1 - torch.tanh(x) ** 2


class BiasSumWrongDim(Function):
    """Bias gradient summed over the feature dim instead of the batch dim (square input)."""

    @staticmethod
    def forward(ctx, x, bias):
        return x + bias

    @staticmethod
    def backward(ctx, g):
        return g, g.sum(1)


class LeakyReLUWrongSlope(Function):
    """Kinks at 0 in the input, but the negative slope is wrong: must still fail."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.where(x > 0, x, 0.1 * x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return torch.where(x > 0, g, 0.01 * g)


class CubeDetachInBackward(Function):
    """First order right, backward not differentiable in x (.detach() inside backward): its
    double backward silently 0, a double-backward-unsupported warning (issue 18)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * x.detach() ** 2 * g


class SigmoidSavesDerivative(Function):
    """Saves s*(1-s) computed in forward (no graph to x): second derivative lost (0)."""

    @staticmethod
    def forward(ctx, x):
        s = torch.sigmoid(x)
        ctx.save_for_backward(s * (1 - s))
        return s

    @staticmethod
    def backward(ctx, g):
        (d,) = ctx.saved_tensors
        return g * d


class CubeHalfDetached(Function):
    """3 g x x.detach() for x**3: first order right, its derivative 3 g x non-zero and half
    the true 6 g x: autograd sees only part of backward's dependence on x, a warning naming
    x as partial (an error where second order is required)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * g * x * x.detach()


class NormNaNAtZero(Function):
    """Euclidean norm with backward x/|x|: NaN at the origin where 0 is a valid subgradient."""

    @staticmethod
    def forward(ctx, x):
        n = x.norm()
        ctx.save_for_backward(x, n)
        return n

    @staticmethod
    def backward(ctx, g):
        x, n = ctx.saved_tensors
        return g * x / n


class SoftplusUnstableBackward(Function):
    """Stable forward, backward exp(x)/(1+exp(x)) overflows to inf/inf = NaN for large x."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.nn.functional.softplus(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x.exp() / (1 + x.exp())


class SquareWrongJvp(Function):
    """Backward right, jvp off by a factor of 2."""

    @staticmethod
    def forward(x):
        return x * x

    @staticmethod
    def setup_context(ctx, inputs, output):
        (x,) = inputs
        ctx.save_for_backward(x)
        ctx.save_for_forward(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g

    @staticmethod
    def jvp(ctx, t):
        (x,) = ctx.saved_tensors
        return 4 * x * t


class SinJvpForgetsTangent(Function):
    """jvp returns the derivative, not derivative times tangent."""

    @staticmethod
    def forward(x):
        return x.sin()

    @staticmethod
    def setup_context(ctx, inputs, output):
        (x,) = inputs
        ctx.save_for_backward(x)
        ctx.save_for_forward(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return x.cos() * g

    @staticmethod
    def jvp(ctx, t):
        (x,) = ctx.saved_tensors
        return x.cos()


class SumVmapWrongDim(Function):
    """Row sums with a vmap rule that reduces the wrong dimension."""

    @staticmethod
    def forward(x):
        return x.sum(-1)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.shape = inputs[0].shape

    @staticmethod
    def backward(ctx, g):
        return g.unsqueeze(-1).expand(ctx.shape).clone()

    @staticmethod
    def vmap(info, in_dims, x):
        x = x.movedim(in_dims[0], 0)
        return x.sum(1), 0


class ScaleVmapItem(Function):
    """generate_vmap_rule but backward calls .item(): vmap cannot batch it."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x, s):
        return x * s

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, g):
        x, s = ctx.saved_tensors
        return g * s.item(), (g * x).sum()


class SignIdentitySTE(Function):
    """Straight-through sign, declared clipped surrogate, but backward is the plain identity."""

    @staticmethod
    def forward(ctx, x):
        return torch.sign(x)

    @staticmethod
    def backward(ctx, g):
        return g


def clipped_identity(x):
    return x.clamp(-1, 1)


class ApproxWrongSign(Function):
    """'Approximate' gradient from an external solver that got the sign wrong."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return -x.cos() * g * 1.01


CASES = [
    Case("exp-doubled-derivative", ExpDoubled, lambda: (_r(5),), False, ("gradient-mismatch",)),
    Case("matmul-transposed-grad", MatmulTransposed, lambda: (_r(3, 3), _r(3, 3, seed=1)), False,
         ("gradient-mismatch",)),
    Case("no-chain-rule", NoChainRule, lambda: (_r(4, 2),), False, ("gradient-mismatch",)),
    Case("bias-sum-wrong-dim", BiasSumWrongDim, lambda: (_r(3, 3), _r(3, seed=1)), False,
         ("gradient-mismatch",)),
    Case("leaky-relu-wrong-slope-with-kink", LeakyReLUWrongSlope,
         lambda: (torch.tensor([-1.0, 0.0, 2.0, -0.5], dtype=torch.float64),), False,
         ("gradient-mismatch",)),
    # A second derivative autograd sees none or only part of passes with a warning (issue 18).
    Case("cube-detach-in-backward", CubeDetachInBackward, lambda: (_r(6),), True,
         ("double-backward-unsupported",)),
    Case("sigmoid-saves-derivative", SigmoidSavesDerivative, lambda: (_r(6),), True,
         ("double-backward-unsupported",)),
    Case("cube-half-detached", CubeHalfDetached, lambda: (_r(6),), True,
         ("double-backward-unsupported",)),
    Case("norm-nan-at-zero", NormNaNAtZero, lambda: (torch.zeros(3, dtype=torch.float64),),
         False, ("nan-gradient",)),
    Case("softplus-overflow-backward", SoftplusUnstableBackward,
         lambda: (torch.tensor([1.0, 800.0, -3.0], dtype=torch.float64),), False,
         ("nan-gradient",)),
    Case("square-wrong-jvp", SquareWrongJvp, lambda: (_r(4),), False, ("jvp-mismatch",)),
    Case("sin-jvp-forgets-tangent", SinJvpForgetsTangent, lambda: (_r(4),), False,
         ("jvp-mismatch",)),
    Case("sum-vmap-wrong-dim", SumVmapWrongDim, lambda: (_r(3, 4),), False, ("vmap-mismatch",)),
    Case("scale-vmap-item", ScaleVmapItem, lambda: (_r(3), torch.tensor(2.0, dtype=torch.float64)),
         False, ("vmap-error",)),
    Case("sign-ste-wrong-surrogate", SignIdentitySTE, lambda: (_r(8) * 2,), False,
         ("surrogate-mismatch",), surrogate=clipped_identity),
    Case("approximate-wrong-sign", ApproxWrongSign, lambda: (_r(5),), False,
         ("gradient-quality",), options={"approximate": True}),
]
