"""Correct Functions that trip plain gradcheck or naive checkers: must pass."""

import torch
from torch.autograd import Function
from torch.autograd.function import once_differentiable

from corpus import Case
from corpus import randn as _r


class ReLUAtZero(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clamp(min=0)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (x > 0).to(g.dtype)


class ClampAtBounds(Function):
    @staticmethod
    def forward(ctx, x, lo, hi):
        ctx.save_for_backward(x)
        ctx.lo, ctx.hi = lo, hi
        return x.clamp(lo, hi)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * ((x >= ctx.lo) & (x <= ctx.hi)).to(g.dtype), None, None


class MaxWithTies(Function):
    """Row max; ties send the gradient to the first maximum (a valid subgradient)."""

    @staticmethod
    def forward(ctx, x):
        values, idx = x.max(dim=1)
        ctx.save_for_backward(idx)
        ctx.shape = x.shape
        return values

    @staticmethod
    def backward(ctx, g):
        (idx,) = ctx.saved_tensors
        out = torch.zeros(ctx.shape, dtype=g.dtype)
        return out.scatter(1, idx.unsqueeze(1), g.unsqueeze(1))


class AbsAtZero(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.abs()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * torch.sign(x)


class SignSTE(Function):
    """Straight-through sign with clipped identity gradient (declared surrogate)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.sign(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (x.abs() <= 1).to(g.dtype)


class RoundSTE(Function):
    @staticmethod
    def forward(ctx, x):
        return x.round()

    @staticmethod
    def backward(ctx, g):
        return g


class GradReverse(Function):
    @staticmethod
    def forward(ctx, x, alpha):
        ctx.alpha = alpha
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return -ctx.alpha * g, None


class Dropout(Function):
    """Saves its mask: backward reuses the forward's noise."""

    @staticmethod
    def forward(ctx, x, p):
        mask = (torch.rand_like(x) >= p).to(x.dtype) / (1 - p)
        ctx.save_for_backward(mask)
        return x * mask

    @staticmethod
    def backward(ctx, g):
        (mask,) = ctx.saved_tensors
        return g * mask, None


class GumbelSoftmax(Function):
    """Soft Gumbel-softmax sample; the noise is saved through the output."""

    @staticmethod
    def forward(ctx, logits, tau):
        u = torch.rand_like(logits).clamp(1e-9, 1 - 1e-9)
        y = torch.softmax((logits - torch.log(-torch.log(u))) / tau, dim=-1)
        ctx.save_for_backward(y)
        ctx.tau = tau
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return y * (g - (g * y).sum(-1, keepdim=True)) / ctx.tau, None


class AddInplaceDirty(Function):
    """In-place add with mark_dirty: legal."""

    @staticmethod
    def forward(ctx, x, y):
        x.add_(y)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return g, g


class MaxWithIndices(Function):
    """Two outputs, the indices marked non-differentiable."""

    @staticmethod
    def forward(ctx, x):
        values, idx = x.max(dim=-1)
        ctx.save_for_backward(idx)
        ctx.mark_non_differentiable(idx)
        ctx.shape = x.shape
        return values, idx

    @staticmethod
    def backward(ctx, g, _gidx):
        (idx,) = ctx.saved_tensors
        return torch.zeros(ctx.shape, dtype=g.dtype).scatter(-1, idx.unsqueeze(-1),
                                                              g.unsqueeze(-1))


class LinearOptionalBias(Function):
    @staticmethod
    def forward(ctx, x, w, b=None):
        ctx.save_for_backward(x, w)
        ctx.has_bias = b is not None
        out = x @ w.t()
        return out + b if b is not None else out

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        gb = g.sum(0) if ctx.has_bias and ctx.needs_input_grad[2] else None
        return g @ w, g.t() @ x, gb


class CubeOnce(Function):
    """once_differentiable: double backward intentionally unsupported."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * x**2 * g


class Float32Only(Function):
    """Wraps 'external' float32 code: refuses float64."""

    @staticmethod
    def forward(ctx, x):
        if x.dtype != torch.float32:
            raise TypeError("kernel only supports float32")
        ctx.save_for_backward(x)
        return x.sin()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return x.cos() * g


class SoftmaxFloat32(Function):
    """Correct softmax fed float32 inputs (checked in float64 on copies)."""

    @staticmethod
    def forward(ctx, x):
        y = torch.softmax(x, -1)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return y * (g - (g * y).sum(-1, keepdim=True))


class SquareWithJvp(Function):
    generate_vmap_rule = True

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
        return 2 * x * t


class FDBackward(Function):
    """An 'external solver' whose backward is itself a finite difference (approximate)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.exp()

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        h = 1e-3
        return g * ((x + h).exp() - x.exp()) / h


class CubeWithDerivativeOutput(Function):
    """PyTorch docs pattern: returns dx as a second output so double backward works."""

    @staticmethod
    def forward(x):
        return x**3, 3 * x**2

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0], output[1])

    @staticmethod
    def backward(ctx, g, gdx):
        x, dx = ctx.saved_tensors
        return g * dx + gdx * 6 * x


class Float32Kernel(Function):
    """Computes and returns float32 whatever it is given (a float32-only library)."""

    @staticmethod
    def forward(ctx, x):
        x32 = x.float()
        ctx.save_for_backward(x32)
        return torch.tanh(x32)

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        (x32,) = ctx.saved_tensors
        return (1 - torch.tanh(x32) ** 2) * g.float()


def _dirty_args():
    return (_r(4), _r(4, seed=1))


CASES = [
    Case("relu-at-zero", ReLUAtZero,
         lambda: (torch.tensor([-1.0, 0.0, 0.0, 2.0], dtype=torch.float64),), True, ("kink",)),
    Case("clamp-at-bounds", ClampAtBounds,
         lambda: (torch.tensor([-2.0, -1.0, 0.3, 1.0, 3.0], dtype=torch.float64), -1.0, 1.0),
         True, ("kink",)),
    Case("max-with-ties", MaxWithTies,
         lambda: (torch.tensor([[1.0, 3.0, 3.0], [0.5, -1.0, 0.2]], dtype=torch.float64),),
         True, ("kink",)),
    Case("abs-at-zero", AbsAtZero, lambda: (torch.tensor([0.0, -2.0, 1.5], dtype=torch.float64),),
         True, ("kink",)),
    Case("sign-ste-with-surrogate", SignSTE, lambda: (_r(8) * 2,), True,
         surrogate=lambda x: x.clamp(-1, 1)),
    Case("round-ste-with-surrogate", RoundSTE, lambda: (_r(6) * 3,), True,
         surrogate=lambda x: x * 1.0),
    Case("gradient-reversal-with-surrogate", GradReverse, lambda: (_r(5), 0.5), True,
         surrogate=lambda x, a: -a * x),
    Case("dropout-saved-mask", Dropout, lambda: (_r(10), 0.3), True, ("random-forward",)),
    Case("dropout-2d-input", Dropout, lambda: (_r(4, 5), 0.5), True, ("random-forward",)),
    Case("gumbel-softmax", GumbelSoftmax, lambda: (_r(2, 5), 0.7), True, ("random-forward",)),
    Case("add-inplace-mark-dirty", AddInplaceDirty, _dirty_args, True),
    Case("max-with-indices", MaxWithIndices, lambda: (_r(3, 4),), True),
    Case("linear-bias-none", LinearOptionalBias, lambda: (_r(4, 3), _r(2, 3, seed=1), None), True),
    Case("linear-bias", LinearOptionalBias,
         lambda: (_r(4, 3), _r(2, 3, seed=1), _r(2, seed=2)), True),
    Case("cube-once-differentiable", CubeOnce, lambda: (_r(5),), True),
    Case("float32-only-kernel", Float32Only, lambda: (_r(6, dtype=torch.float32),), True,
         ("float64-unsupported",)),
    Case("softmax-float32-inputs", SoftmaxFloat32, lambda: (_r(3, 5, dtype=torch.float32),), True),
    Case("square-jvp-vmap", SquareWithJvp, lambda: (_r(4),), True),
    Case("fd-backward-approximate", FDBackward, lambda: (_r(5),), True, ("gradient-quality",),
         options={"approximate": True}),
    Case("cube-derivative-output", CubeWithDerivativeOutput, lambda: (_r(5),), True),
    Case("float32-kernel-float32-inputs", Float32Kernel, lambda: (_r(6, dtype=torch.float32),),
         True, ("low-precision-numerics",)),
    Case("plain-callable", lambda a, b: (a * b).sin(), lambda: (_r(3), _r(3, seed=1)), True),
]
