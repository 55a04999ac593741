"""Second instances of bug classes, so every class is covered at least twice."""

import itertools

import torch
from torch.autograd import Function

from corpus import Case
from corpus import randn as _r

_TICKS = itertools.count()


class ScaleByTick(Function):
    """Backward depends on a module-level counter (e.g. a 'warm-up schedule' hidden inside)."""

    @staticmethod
    def forward(ctx, x):
        return x * 3

    @staticmethod
    def backward(ctx, g):
        return g * 3 * (1 + 1e-6 * next(_TICKS))


class KeepsLastCtx(Function):
    """Keeps the last ctx on the class for 'debugging': outlives its outputs."""

    last = None

    @staticmethod
    def forward(ctx, x):
        KeepsLastCtx.last = ctx
        ctx.save_for_backward(x)
        return x.sin()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x.cos()


class DoubleVmapWrongOutDim(Function):
    """vmap rule computes the right values but declares the batch on the wrong output dim."""

    @staticmethod
    def forward(x):
        return x * 2

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, g):
        return g * 2

    @staticmethod
    def vmap(info, in_dims, x):
        x = x.movedim(in_dims[0], 0)
        return (x * 2).movedim(0, -1).contiguous(), 0


class ApproxWrongScale(Function):
    """'Approximate' gradient 2.5x too large: relative error 1.5, unusable."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.exp()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2.5 * x.exp() * g + 0.3 * g.flip(0)


class ApproxOff21Percent(Function):
    """'Approximate' gradient 21% too large: points the right way, fails the 1e-2 threshold."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.exp()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 1.21 * x.exp() * g


class TanhSquaresSavedOutput(Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * (1 - y.pow_(2))


class NeedsLongIndex(Function):
    """Forward indexes with a float tensor: crashes on the example inputs."""

    @staticmethod
    def forward(ctx, x, idx):
        return x[idx]

    @staticmethod
    def backward(ctx, g):
        return g, None


class GradForFlag(Function):
    """Returns a gradient for a bool flag."""

    @staticmethod
    def forward(ctx, x, flip):
        ctx.flip = flip
        return -x if flip else x

    @staticmethod
    def backward(ctx, g):
        return (-g if ctx.flip else g), g.sum()


def detached_square(x):
    return (x * x).detach()


class MulNeverChecksNeeds(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b + a

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return g * (b + 1), g * a


class BackwardNotImplemented(Function):
    @staticmethod
    def forward(ctx, x):
        return x.sort().values

    @staticmethod
    def backward(ctx, g):
        raise NotImplementedError("sort backward: TODO")


class NumpyForwardVmap(Function):
    """Claims generate_vmap_rule but computes forward through numpy."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return torch.as_tensor(x.detach().numpy() ** 2)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g


class AccumulatesIntoInput(Function):
    """Backward 'accumulates' the gradient into the input tensor it kept a reference to."""

    @staticmethod
    def forward(ctx, x):
        ctx.x = x
        return x * 2

    @staticmethod
    def backward(ctx, g):
        ctx.x.add_(g)
        return g * 2


class JvpTwoTangents(Function):
    """jvp returns two tangents for a single output."""

    @staticmethod
    def forward(x):
        return x.exp()

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)
        ctx.save_for_forward(output)

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y

    @staticmethod
    def jvp(ctx, t):
        (y,) = ctx.saved_tensors
        return y * t, t


class NeedsIndexSwapped(Function):
    """Guards each gradient with the other input's needs_input_grad flag."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        gx = g * w if ctx.needs_input_grad[1] else None
        gw = g * x if ctx.needs_input_grad[0] else None
        return gx, gw


class BiasGradFromWeightBranch(Function):
    """Computes the bias gradient inside the weight branch: frozen weight -> no bias grad."""

    @staticmethod
    def forward(ctx, x, w, b):
        ctx.save_for_backward(x, w)
        return x @ w.t() + b

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        gx = g @ w if ctx.needs_input_grad[0] else None
        gw = gb = None
        if ctx.needs_input_grad[1]:
            gw = g.t() @ x
            gb = g.sum(0)
        return gx, gw, gb


CASES = [
    Case("needs-index-swapped", NeedsIndexSwapped, lambda: (_r(3), _r(3, seed=1)), False,
         ("needs-input-grad-mismatch",)),
    Case("bias-grad-in-weight-branch", BiasGradFromWeightBranch,
         lambda: (_r(4, 3), _r(2, 3, seed=1), _r(2, seed=2)), False,
         ("needs-input-grad-mismatch",)),
    Case("jvp-two-tangents", JvpTwoTangents, lambda: (_r(4),), False, ("jvp-error",)),
    Case("backward-not-implemented", BackwardNotImplemented, lambda: (_r(4),), False,
         ("backward-error",)),
    Case("numpy-forward-vmap", NumpyForwardVmap, lambda: (_r(4),), False, ("vmap-error",)),
    Case("accumulates-into-input", AccumulatesIntoInput, lambda: (_r(4),), False,
         ("input-mutated-in-backward",)),
    Case("scale-by-tick", ScaleByTick, lambda: (_r(4),), False, ("nondeterministic-backward",)),
    Case("keeps-last-ctx", KeepsLastCtx, lambda: (_r(4),), True, ("ctx-leak",)),
    Case("vmap-wrong-out-dim", DoubleVmapWrongOutDim, lambda: (_r(3, 2),), False,
         ("vmap-mismatch",)),
    Case("approximate-21-percent-off", ApproxOff21Percent, lambda: (_r(5),), False,
         ("gradient-quality",), options={"approximate": True}),
    Case("approximate-wrong-scale", ApproxWrongScale, lambda: (_r(5),), False,
         ("gradient-quality",), options={"approximate": True}),
    Case("tanh-squares-saved-output", TanhSquaresSavedOutput, lambda: (_r(5),), False,
         ("saved-tensor-mutated",)),
    Case("float-index-crash", NeedsLongIndex, lambda: (_r(5), torch.tensor([0.0, 2.0])), False,
         ("forward-error",)),
    Case("grad-for-bool-flag", GradForFlag, lambda: (_r(3), True), False, ("non-tensor-grad",)),
    Case("detached-output", detached_square, lambda: (_r(3),), False, ("no-gradient-path",)),
    Case("mul-never-checks-needs", MulNeverChecksNeeds, lambda: (_r(3), _r(3, seed=1)), True,
         ("unneeded-grad",)),
]
