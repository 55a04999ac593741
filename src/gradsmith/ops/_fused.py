"""Fused, memory-saving ops: Linear + ReLU and add + ReLU.

Both save a bit-packed mask (1 bit per output element) instead of the activation (32 bits in
float32). Whether that saves memory in a real network depends on the next layer: a following
Linear saves its input, which is this op's output, so the activation is kept anyway and the mask
is extra. ``docs/ops.md`` has the measured numbers.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from gradsmith._errors import GradsmithError
from gradsmith._example import example
from gradsmith.ops import _fused_native as _native
from gradsmith.ops._bitmask import pack_mask, unpack_mask
from gradsmith.ops._common import example_input as _x64
from gradsmith.ops._validate import check_broadcastable, check_devices, check_floating


class _FusedLinearReLUFn(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x, weight, bias):
        return torch.relu(F.linear(x, weight, bias))

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, weight, bias = inputs
        ctx.bias_dtype = None if bias is None else bias.dtype
        ctx.out_shape = output.shape
        # x and weight are inputs (kept for the matmul gradients, as Linear keeps them); the
        # packed mask replaces the activation that a separate ReLU would save.
        ctx.save_for_backward(x, weight, pack_mask(output > 0))

    @staticmethod
    def backward(ctx, grad):
        x, weight, packed = ctx.saved_tensors
        g = grad * unpack_mask(packed, ctx.out_shape)
        # Under autocast the forward ran in lower precision: do the matmuls in the gradient's
        # dtype, as autocast's own backward does, then return each gradient in its input's dtype.
        g2 = g.reshape(-1, g.shape[-1])
        grad_x = grad_w = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_x = (g @ weight.to(g.dtype)).to(x.dtype)
        if ctx.needs_input_grad[1]:
            grad_w = (g2.t() @ x.reshape(-1, x.shape[-1]).to(g.dtype)).to(weight.dtype)
        if ctx.bias_dtype is not None and ctx.needs_input_grad[2]:
            grad_b = g2.sum(0).to(ctx.bias_dtype)
        return grad_x, grad_w, grad_b


def _check_linear_args(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> None:
    fn = "fused_linear_relu"
    check_floating(fn, "x", x)
    check_floating(fn, "weight", weight)
    if bias is not None:
        check_floating(fn, "bias", bias)
    check_devices(fn, ("x", x), ("weight", weight), ("bias", bias))
    if weight.dim() != 2:
        raise GradsmithError(
            f"{fn}: weight must be 2-d (out_features, in_features), got shape "
            f"{tuple(weight.shape)}"
        )
    if x.dim() == 0 or x.shape[-1] != weight.shape[1]:
        raise GradsmithError(
            f"{fn}: x's last dimension must equal weight.shape[1] = {weight.shape[1]} "
            f"(in_features), got x of shape {tuple(x.shape)}"
        )
    if bias is not None:
        check_floating(fn, "bias", bias)
        if bias.shape != (weight.shape[0],):
            raise GradsmithError(
                f"{fn}: bias must have shape ({weight.shape[0]},) (out_features), got "
                f"{tuple(bias.shape)}"
            )
    dtypes = {t.dtype for t in (x, weight, bias) if t is not None}
    if len(dtypes) > 1 and not torch.is_autocast_enabled(x.device.type):
        raise GradsmithError(
            f"{fn}: x, weight and bias must share a dtype outside autocast, got "
            f"{sorted(str(d) for d in dtypes)}; cast them (e.g. x.to(weight.dtype))"
        )


@example(lambda: (_x64(4, 3), _x64(5, 3, seed=1), _x64(5, seed=2)), name="fused_linear_relu")
@example(lambda: (_x64(2, 4, 3), _x64(5, 3, seed=1), None), name="fused_linear_relu-nobias")
def fused_linear_relu(x: torch.Tensor, weight: torch.Tensor,
                      bias: torch.Tensor | None = None) -> torch.Tensor:
    """``relu(x @ weight.T + bias)``, saving a bit-packed mask instead of the activation.

    Gradients, with ``g = grad * (y > 0)``: ``dx = g @ weight``, ``dweight = g^T x`` (summed
    over leading dims), ``dbias = sum(g)``. The backward is differentiable (the mask is a
    constant, exactly as ReLU's second derivative is zero almost everywhere). Saves ``x``,
    ``weight`` and a bit-packed mask (1 bit per output element); see ``docs/ops.md`` for when
    this beats Linear + ReLU.

    Args:
        x: floating tensor ``(..., in_features)``.
        weight: ``(out_features, in_features)``.
        bias: ``(out_features,)`` or ``None``.

    Returns:
        Tensor ``(..., out_features)``.

    Raises:
        GradsmithError: on non-floating tensors, mismatched shapes, or mixed dtypes outside
            autocast.

    Example:
        >>> from gradsmith.functional import fused_linear_relu
        >>> fused_linear_relu(torch.tensor([[1.0, -2.0]]), torch.eye(2), torch.zeros(2))
        tensor([[1., 0.]])
    """
    _check_linear_args(x, weight, bias)
    return _FusedLinearReLUFn.apply(x, weight, bias)


class FusedLinearReLU(nn.Linear):
    """Drop-in for ``nn.Sequential(nn.Linear(...), nn.ReLU())`` built on :func:`fused_linear_relu`.

    Same constructor, parameters and ``state_dict`` as ``nn.Linear``. For dynamic quantization
    use :func:`gradsmith.nn.quantize_dynamic`: torch's ``quantize_dynamic`` matches exact
    types and silently leaves this layer in float.

    Example:
        >>> from gradsmith.nn import FusedLinearReLU
        >>> FusedLinearReLU(3, 4)
        FusedLinearReLU(in_features=3, out_features=4, bias=True)
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return fused_linear_relu(x, self.weight, self.bias)


class _FusedAddReLUFn(torch.autograd.Function):
    """``relu(x + y)`` and its bit-packed mask: a second output, not differentiable, so that
    the native kernel writes both in one pass (as ``torch.native_dropout`` returns its mask)."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x, y):
        if x.shape == y.shape and _native.usable(x, y):
            return _native.add_relu(x, y)
        out = torch.relu(x + y)
        # ~(out <= 0), not out > 0: a NaN passes its gradient, as in torch.relu's backward
        return out, pack_mask(~(out <= 0))

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, y = inputs
        out, packed = output
        ctx.mark_non_differentiable(packed)
        ctx.shapes = (x.shape, y.shape)
        ctx.dtypes = (x.dtype, y.dtype)
        ctx.out_shape = out.shape
        ctx.save_for_backward(packed)

    @staticmethod
    def backward(ctx, grad, _grad_mask):
        (packed,) = ctx.saved_tensors
        if grad.shape == ctx.out_shape and not (torch.is_grad_enabled() and grad.requires_grad) \
                and _native.usable(grad) \
                and not torch._C._functorch.is_functorch_wrapped_tensor(packed):  # torch.func
            g = _native.relu_mask_backward(grad, packed, ctx.out_shape)
        else:  # differentiable (double backward), broadcast, vmap, compile, other dtypes
            g = torch.where(unpack_mask(packed, ctx.out_shape), grad, 0)
        out = []
        for i, (shape, dtype) in enumerate(zip(ctx.shapes, ctx.dtypes)):
            gi = None
            if ctx.needs_input_grad[i]:
                gi = (g.sum_to_size(shape) if g.shape != shape else g).to(dtype)
            out.append(gi)
        return tuple(out)


@example(lambda: (_x64(4, 5), _x64(4, 5, seed=1)), name="fused_add_relu")
@example(lambda: (_x64(4, 5), _x64(5, seed=1)), name="fused_add_relu-broadcast")
def fused_add_relu(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``relu(x + y)`` (e.g. a residual connection), saving a bit-packed mask only.

    Gradient: ``grad * (x + y > 0)`` for both inputs, summed to each input's shape when it was
    broadcast. Differentiable backward (constant mask). Saves a bit-packed mask (1 bit per
    element), where the plain composition saves the (32-bit float32) output of ``relu``.

    Args:
        x: floating tensor.
        y: floating tensor broadcastable with ``x``.

    Returns:
        Tensor of the broadcast shape.

    Raises:
        GradsmithError: if an input is not floating point or the shapes do not broadcast.

    Example:
        >>> from gradsmith.functional import fused_add_relu
        >>> fused_add_relu(torch.tensor([1.0, -2.0, 0.5]), torch.tensor([0.5, 1.0, -1.0]))
        tensor([1.5000, 0.0000, 0.0000])
    """
    check_floating("fused_add_relu", "x", x)
    check_floating("fused_add_relu", "y", y)
    check_devices("fused_add_relu", ("x", x), ("y", y))
    check_broadcastable("fused_add_relu", "x", x, "y", y)
    return _FusedAddReLUFn.apply(x, y)[0]

