"""Fused fast path for :class:`._attention._AttentionFn`: PyTorch's CPU flash-attention kernel.

When nothing needs the blockwise Python kernels (no mask, no bias, no dropout, plain 4-d fp32 or
fp64 tensors on the CPU), the forward and backward call PyTorch's fused C++ flash-attention ops,
the same ones ``F.scaled_dot_product_attention`` uses on the CPU. They compute the same thing as
:mod:`._attention_kernels` and return the same O(L) statistic, the row logsumexp, so the saved
tensors (``q, k, v``, output, logsumexp) do not change; only the time does.

Why each condition: the kernel accepts only 4-d ``(B, H, L, d)`` inputs with ``v``'s feature size
equal to ``d``; its mask is an additive float tensor (our bool mask with fully masked rows would
give NaN rows instead of our zeros); it has no differentiable bias; its dropout cannot replay our
counter-based masks; under ``torch.func`` transforms it has no batching rule; in half precision
(autocast) our path keeps its own tested numerics; on an empty dim (no heads) the kernel crashes
the process with a division by zero.
"""

from __future__ import annotations

import torch
from torch._C._functorch import is_functorch_wrapped_tensor

_FUSED_DTYPES = (torch.float32, torch.float64)


def use_fused(q, k, v, mask, bias, dropout_p) -> bool:
    """True when :func:`fused_forward` / :func:`fused_backward` compute this call.

    Args:
        q: queries, after validation and the autocast cast.
        k: keys.
        v: values.
        mask: the bool mask or None.
        bias: the additive bias or None.
        dropout_p: dropout probability.

    Returns:
        Whether the fused kernel applies (the blockwise Python kernels run otherwise).

    Example:
        >>> q = torch.randn(2, 4, 16, 8)
        >>> use_fused(q, q, q, None, None, 0.0), use_fused(q[0], q[0], q[0], None, None, 0.0)
        (True, False)
    """
    if mask is not None or bias is not None or dropout_p != 0.0:
        return False
    if q.dim() != 4 or q.device.type != "cpu" or q.dtype not in _FUSED_DTYPES:
        return False
    if v.shape[-1] != q.shape[-1] or 0 in q.shape or 0 in k.shape:
        return False  # the kernel dies with SIGFPE on empty heads (torch 2.13)
    if torch.compiler.is_compiling():  # traced tensors are plain here: the aten ops trace as is
        return True
    return not any(is_functorch_wrapped_tensor(t) for t in (q, k, v))


# The aten ops read the feature dim as dense: with a last-dim stride != 1 (a transposed or
# column-major tensor) they return wrong numbers without an error (torch 2.13), so every tensor
# goes in contiguous. The copies are O(L d) temporaries, nothing is saved twice.


def fused_forward(q, k, v, causal: bool, scale: float):
    """``(out, lse)`` from the fused kernel; ``lse`` is ``(B, H, L)`` in ``q``'s dtype."""
    return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
        q.contiguous(), k.contiguous(), v.contiguous(), 0.0, causal, scale=scale)


def fused_backward(q, k, v, out, lse, dout, causal: bool, scale: float):
    """``(dq, dk, dv)`` from the fused kernel, given the forward's ``out`` and ``lse``."""
    q, k, v, out, dout = (t.contiguous() for t in (q, k, v, out, dout))
    return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(
        dout, q, k, v, out, lse, 0.0, causal, scale=scale)
