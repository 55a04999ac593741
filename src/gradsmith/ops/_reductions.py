"""Reductions: logsumexp over one or several dims.

(Training-mode batch norm re-implemented a builtin; it is a teaching example now:
:class:`gradsmith.examples.builtins.BatchNorm`.)
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from gradsmith._errors import GradsmithError
from gradsmith._example import example
from gradsmith.ops._common import example_input as _x64
from gradsmith.ops._common import opmath
from gradsmith.ops._validate import check_bool, check_devices, check_dim, check_floating


class _LogSumExpFn(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x, dims, keepdim):
        return torch.logsumexp(x, dims, keepdim)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, dims, keepdim = inputs
        ctx.dims, ctx.keepdim = dims, keepdim
        # Input and output: the gradient softmax(x) = exp(x - y) is rebuilt from both, and a
        # saved output stays connected to autograd, so double backward is exact.
        ctx.save_for_backward(x, output)

    @staticmethod
    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        if not ctx.keepdim and x.dim() > 0:
            for d in ctx.dims:  # ascending, so each index refers to the final layout
                y, grad = y.unsqueeze(d), grad.unsqueeze(d)
        return (grad * torch.exp(opmath(x) - y)).to(x.dtype), None, None


def _normalise_dims(x: torch.Tensor, dim: int | Sequence[int]) -> tuple[int, ...]:
    fn = "logsumexp"
    seq = (dim,) if not isinstance(dim, (tuple, list)) else tuple(dim)
    if not seq:
        raise GradsmithError(f"{fn}: dim must be an int or a non-empty tuple of ints, got {dim!r}")
    dims = tuple(sorted(check_dim(fn, "dim", d, x.dim()) for d in seq))
    if len(set(dims)) != len(dims):
        raise GradsmithError(f"{fn}: dim must not repeat a dimension, got {dim!r}")
    return dims


@example(lambda: (_x64(4, 5, scale=3.0), 1), name="logsumexp")
@example(lambda: (_x64(3, 4, 2, scale=3.0), (0, 2), True), name="logsumexp-multi-dim-keepdim")
def logsumexp(x: torch.Tensor, dim: int | Sequence[int], keepdim: bool = False) -> torch.Tensor:
    """``log(sum(exp(x)))`` along ``dim``, computed stably as ``m + log(sum(exp(x - m)))``.

    Gradient: ``grad * exp(x - y) = grad * softmax(x)`` along ``dim``; differentiable backward
    (second derivative: the softmax Jacobian ``diag(p) - p p^T``). Saves ``x`` and the output.

    Args:
        x: floating-point tensor.
        dim: a dimension or a tuple of dimensions to reduce.
        keepdim: keep the reduced dimensions with size 1.

    Returns:
        Tensor equal to ``torch.logsumexp(x, dim, keepdim)``.

    Raises:
        GradsmithError: if ``x`` is not floating point or ``dim`` is out of range or repeated.

    Example:
        >>> from gradsmith.functional import logsumexp
        >>> logsumexp(torch.tensor([[100.0, 100.0]]), dim=1)  # exp(100) overflows float32
        tensor([100.6931])
    """
    check_floating("logsumexp", "x", x)
    check_devices("logsumexp", ("x", x))
    dims = _normalise_dims(x, dim)
    keepdim = check_bool("logsumexp", "keepdim", keepdim)
    return _LogSumExpFn.apply(x, dims, keepdim)

