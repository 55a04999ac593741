"""Linear-algebra patterns: gradients of products, and summing over broadcast dimensions.

The rule behind all of them: a gradient has exactly its input's shape. Where forward
broadcast an input (a bias over the batch, a weight vector over rows), backward sums the
incoming gradient over the broadcast dimensions (``Tensor.sum_to_size`` does it generally).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.autograd import Function

from gradsmith._example import example
from gradsmith.examples._inputs import randn


@example(lambda: (randn(4, 3), randn(5, 3, seed=1), randn(5, seed=2)), name="with bias")
@example(lambda: (randn(2, 4, 3), randn(5, 3, seed=1), None), name="no bias, batched")
class Linear(Function):
    """``y = x W^T + b`` for ``x`` of shape ``(..., in)``, ``W`` ``(out, in)``, optional ``b``.

    Gradients: ``dx = g W``, ``dW = g^T x`` (summed over all leading dims), ``db = sum g``
    over the leading dims; ``None`` for a missing bias.

    Example:
        >>> x, w = torch.ones(2, 3), torch.ones(4, 3)
        >>> Linear.apply(x, w, None).shape
        torch.Size([2, 4])
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(input, weight, bias=None):
        out = input @ weight.mT
        return out if bias is None else out + bias

    @staticmethod
    def setup_context(ctx, inputs, output):
        input, weight, bias = inputs
        ctx.save_for_backward(input, weight)
        ctx.has_bias = bias is not None

    @staticmethod
    def backward(ctx, grad):
        input, weight = ctx.saved_tensors
        # Under autocast forward returns bfloat16 while the saved tensors stay float32, and
        # backward runs outside autocast: match their dtype (a no-op otherwise).
        grad = grad.to(weight.dtype)
        grad_input = grad_weight = grad_bias = None
        if ctx.needs_input_grad[0]:
            grad_input = grad @ weight
        if ctx.needs_input_grad[1]:
            grad_weight = grad.reshape(-1, grad.shape[-1]).mT @ input.reshape(-1, input.shape[-1])
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_bias = grad.reshape(-1, grad.shape[-1]).sum(0)
        return grad_input, grad_weight, grad_bias


@example(lambda: (randn(2, 4, 3), randn(2, 3, 5, seed=1)))
class BatchedMatmul(Function):  # noqa: GS302
    """``C = A @ B`` for batches ``A`` ``(b, n, k)`` and ``B`` ``(b, k, m)``.

    Gradients: ``dA = G B^T`` and ``dB = A^T G``, transposing the last two dims only.

    Example:
        >>> BatchedMatmul.apply(torch.ones(2, 4, 3), torch.ones(2, 3, 5)).shape
        torch.Size([2, 4, 5])
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(a, b):
        return a @ b

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        grad = grad.to(b.dtype)  # bfloat16 under autocast, like Linear
        grad_a = grad @ b.mT if ctx.needs_input_grad[0] else None
        grad_b = a.mT @ grad if ctx.needs_input_grad[1] else None
        return grad_a, grad_b


@example(lambda: (randn(2, 3, 4, 5), randn(3, seed=1)))
class ChannelBiasAdd(Function):
    """Add a per-channel bias to an ``(N, C, H, W)`` tensor: ``y[n, c] = x[n, c] + b[c]``.

    Gradients: ``dx = g``; ``db[c] = sum over n, h, w of g[n, c, h, w]``.

    Example:
        >>> ChannelBiasAdd.apply(torch.zeros(1, 2, 1, 1), torch.tensor([1., 2.])).flatten()
        tensor([1., 2.])
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(input, bias):
        return input + bias.reshape(1, -1, 1, 1)

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, grad):
        # grad itself costs nothing; the reduction is skipped when the bias is frozen.
        grad_bias = grad.sum(dim=(0, 2, 3)) if ctx.needs_input_grad[1] else None
        return grad, grad_bias


@example(lambda: (randn(2, 3, 4), randn(3, 1, seed=1)), name="size-1 dim")
@example(lambda: (randn(4,), randn(2, 3, 1, seed=1)), name="both broadcast")
class BroadcastAdd(Function):
    """``a + b`` for any two broadcastable shapes.

    Gradients: each input gets ``g`` summed back to its own shape: over the leading dims it
    lacks and over the dims where it had size 1 (``g.sum_to_size(shape)``). Summing only over
    the leading dims, the usual mistake, breaks on size-1 dims.

    Example:
        >>> BroadcastAdd.apply(torch.zeros(2, 1), torch.zeros(3)).shape
        torch.Size([2, 3])
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(a, b):
        return a + b

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.shapes = tuple(t.shape for t in inputs)

    @staticmethod
    def backward(ctx, grad):
        shape_a, shape_b = ctx.shapes
        grad_a = grad.sum_to_size(shape_a) if ctx.needs_input_grad[0] else None
        grad_b = grad.sum_to_size(shape_b) if ctx.needs_input_grad[1] else None
        return grad_a, grad_b


@example(lambda: (randn(4, 6), randn(6, seed=1)))
class WeightedSum(Function):
    """``y[i] = sum_j x[i, j] w[j]``: a weight vector shared by every row.

    Gradients: ``dx[i, j] = g[i] w[j]``; ``dw[j] = sum_i g[i] x[i, j]`` (summed over rows).

    Example:
        >>> WeightedSum.apply(torch.ones(2, 3), torch.tensor([1., 2., 3.]))
        tensor([6., 6.])
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(x, w):
        return (x * w).sum(-1)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        grad = grad.unsqueeze(-1)
        grad_x = grad * w if ctx.needs_input_grad[0] else None
        grad_w = (grad * x).sum_to_size(w.shape) if ctx.needs_input_grad[1] else None
        return grad_x, grad_w


@example(lambda: (randn(2, 3, 9), randn(4, 3, 3, seed=1), randn(4, seed=2), 2, 1),
         name="stride 2, padding 1")
@example(lambda: (randn(2, 3, 8), randn(4, 3, 3, seed=1), None, 1, 0), name="no bias")
class Conv1d(Function):
    """1-D convolution ``F.conv1d(x, w, b, stride, padding)`` with an explicit backward.

    Gradients: ``dx`` is the transposed convolution of ``g`` with ``w`` (given ``x``'s length,
    which stride alone does not determine), ``dw`` correlates ``x`` with ``g``, ``db`` sums
    ``g`` over batch and length. ``torch.nn.grad`` computes the first two, differentiably.

    Example:
        >>> Conv1d.apply(torch.ones(1, 1, 5), torch.ones(1, 1, 3), None, 2, 1).flatten()
        tensor([2., 3., 2.])
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(input, weight, bias=None, stride=1, padding=0):
        return F.conv1d(input, weight, bias, stride=stride, padding=padding)

    @staticmethod
    def setup_context(ctx, inputs, output):
        input, weight, bias, stride, padding = inputs
        ctx.save_for_backward(input, weight)
        ctx.has_bias, ctx.stride, ctx.padding = bias is not None, stride, padding

    @staticmethod
    def backward(ctx, grad):
        input, weight = ctx.saved_tensors
        grad = grad.to(weight.dtype)  # bfloat16 under autocast, like Linear
        grad_input = grad_weight = grad_bias = None
        if ctx.needs_input_grad[0]:
            grad_input = torch.nn.grad.conv1d_input(input.shape, weight, grad,
                                                    stride=ctx.stride, padding=ctx.padding)
        if ctx.needs_input_grad[1]:
            grad_weight = torch.nn.grad.conv1d_weight(input, weight.shape, grad,
                                                      stride=ctx.stride, padding=ctx.padding)
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_bias = grad.sum(dim=(0, 2))
        return grad_input, grad_weight, grad_bias, None, None
