"""Memory-efficient scaled dot-product attention: ``_AttentionFn``, ``attention``, ``Attention``.

The forward walks the keys in blocks with an online softmax and saves only ``q, k, v``, the
output and the O(L) row logsumexp; the backward rebuilds each probability block from the
logsumexp (FlashAttention-2). A bias that requires grad gets its gradient summed to its own
shape, so a per-head relative position bias of shape ``(H, L, S)`` costs O(H L S) memory, never
O(B H L S); passed in compact form (``rel_bias``, one value per offset ``j - i``) it costs
O(H (L + S)). Kernels: :mod:`._attention_kernels`; compact relative bias:
:mod:`._attention_rel`; dropout masks: :mod:`._attention_dropout`.

References:
    Dao, "FlashAttention-2: Faster Attention with Better Parallelism and Work Partitioning",
    2023. Rabe and Staats, "Self-attention Does Not Need O(n^2) Memory", 2021.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.function import once_differentiable

from gradsmith._errors import GradsmithError
from gradsmith._example import example
from gradsmith.ops import _attention_args as args
from gradsmith.ops._attention_dropout import row_keys, threshold
from gradsmith.ops._attention_fused import fused_backward, fused_forward, use_fused
from gradsmith.ops._attention_kernels import (
    DEFAULT_BLOCK,
    attention_backward,
    attention_forward,
)
from gradsmith.ops._deploy import NO_GRAPH_EXPORT_GAP
from gradsmith.ops._validate import check_bool, check_int


def _dropout_state(seed, q, dropout_p, batch_offset):
    if dropout_p == 0.0:
        return None
    keys = row_keys(seed, tuple(q.shape[:-2]), q.shape[-2], batch_offset, q.device)
    return keys, threshold(dropout_p), dropout_p


class _AttentionFn(torch.autograd.Function):
    """``softmax(q k^T * scale + bias, masked) @ v`` with blockwise recomputation.

    The backward is ``once_differentiable``: it is written with plain tensor ops on saved
    statistics, so a second derivative through it would be silently wrong; autograd raises
    instead. With ``fused`` (decided by :func:`._attention_fused.use_fused`) forward and backward
    run PyTorch's fused CPU flash-attention kernel instead of the blockwise Python kernels; the
    saved tensors are the same.
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(q, k, v, mask, bias, rel, seed, is_causal, scale, dropout_p, batch_offset, block,
                fused):
        if fused:
            return fused_forward(q, k, v, is_causal, scale)
        dropout = _dropout_state(seed, q, dropout_p, batch_offset)
        return attention_forward(q, k, v, mask, bias, rel, is_causal, scale, dropout, block)

    @staticmethod
    def setup_context(ctx, inputs, output):
        q, k, v, mask, bias, rel, seed, is_causal, scale, dropout_p, batch_offset, block, fused = (
            inputs)
        out, lse = output
        ctx.save_for_backward(q, k, v, mask, bias, rel, seed, out, lse)
        ctx.mark_non_differentiable(lse)
        ctx.options = (is_causal, scale, dropout_p, batch_offset, block, fused)

    @staticmethod
    @once_differentiable
    def backward(ctx, dout, _dlse):
        q, k, v, mask, bias, rel, seed, out, lse = ctx.saved_tensors
        is_causal, scale, dropout_p, batch_offset, block, fused = ctx.options
        if fused:
            dq, dk, dv = fused_backward(q, k, v, out, lse, dout, is_causal, scale)
            return dq, dk, dv, *(None,) * 10
        dropout = _dropout_state(seed, q, dropout_p, batch_offset)
        need_dbias = bias is not None and ctx.needs_input_grad[4]
        need_drel = rel is not None and ctx.needs_input_grad[5]
        dq, dk, dv, dbias, drel = attention_backward(
            q, k, v, out, lse, dout, mask, bias, rel, is_causal, scale, dropout, need_dbias,
            need_drel, block)
        return dq, dk, dv, None, dbias, drel, *(None,) * 7


def _draw_seed(generator, device):
    gen_device = generator.device if generator is not None else torch.device("cpu")
    seed = torch.randint(0, 2**32, (), generator=generator, dtype=torch.int64, device=gen_device)
    return seed.to(device)


def _autocast(q, k, v):
    """Run in the autocast dtype when autocast is on (as SDPA does); statistics stay fp32."""
    device_type = q.device.type
    if torch.is_autocast_enabled(device_type):
        dtype = torch.get_autocast_dtype(device_type)
        q, k, v = q.to(dtype), k.to(dtype), v.to(dtype)
    return q, k, v


def _small(*shape):
    return torch.randn(*shape, dtype=torch.float64, requires_grad=True)


def _example_mask():
    mask = torch.rand(2, 5, 7) > 0.3
    mask[:, 1] = False  # a fully masked row: output 0, gradient 0
    return mask


def _example_bias_mask():
    return _small(2, 2, 5, 3), _small(2, 2, 7, 3), _small(2, 2, 7, 4), _example_mask(), _small(
        2, 5, 7)


def _example_rel_bias():
    """Per-head compact relative bias (2, L + S - 1) with a mask, causal, L != S."""
    return (_small(2, 2, 5, 3), _small(2, 2, 7, 3), _small(2, 2, 7, 4), _example_mask(), None,
            True, None, 0.0, None, _small(2, 5 + 7 - 1))


# The dropout example uses the global RNG, which the checker replays before every evaluation
# (a Generator argument would advance between evaluations).


@example(lambda: (_small(2, 6, 4), _small(2, 6, 4), _small(2, 6, 4)), name="plain",
         gaps=NO_GRAPH_EXPORT_GAP)
@example(lambda: (_small(2, 2, 5, 4), _small(2, 2, 7, 4), _small(2, 2, 7, 4), None, None, True),
         name="fused kernel: 4-d, causal, L != S")
@example(lambda: (*_example_bias_mask(), True), name="mask+bias+causal, L != S",
         gaps=NO_GRAPH_EXPORT_GAP)
@example(_example_rel_bias, name="rel_bias+mask+causal, L != S", gaps=NO_GRAPH_EXPORT_GAP)
@example(lambda: (_small(2, 5, 3), _small(2, 6, 3), _small(2, 6, 2), None, None, False, 0.7, 0.3),
         name="dropout", gaps=NO_GRAPH_EXPORT_GAP)
def attention(q, k, v, mask=None, bias=None, is_causal=False, scale=None, dropout_p=0.0,
              generator=None, rel_bias=None, *, dropout_batch_offset=0):
    """Scaled dot-product attention that saves O(L) statistics instead of the L x S matrix.

    Computes ``softmax(q @ k^T * scale + bias + rel, masked) @ v`` blockwise over the keys
    (online softmax). Saved for backward: ``q, k, v``, the output, the row logsumexp (float32,
    or float64 for float64 inputs), and the mask, bias and rel_bias if given. The backward
    recomputes the scores block by block and is ``once_differentiable`` (double backward
    raises). Without mask, bias, rel_bias and dropout, 4-d ``(B, H, L, d)`` fp32/fp64 CPU inputs
    with ``v``'s feature size ``d`` run PyTorch's fused CPU flash-attention kernel instead (same
    result, same saved tensors, faster); see :mod:`._attention_fused`.

    Args:
        q: queries ``(..., L, d)``.
        k: keys ``(..., S, d)``, same batch dims as ``q``.
        v: values ``(..., S, dv)``.
        mask: bool tensor broadcastable to ``(..., L, S)``; True = attend (like SDPA's bool
            ``attn_mask``). A row with no True entry returns 0 (not NaN) and gets zero gradient.
        bias: float tensor broadcastable to ``(..., L, S)`` added to the scores; differentiable,
            its gradient is summed to its own shape. A bias that depends only on ``j - i``
            (relative position bias, ALiBi) costs far less memory as ``rel_bias``.
        is_causal: query ``i`` attends keys ``j <= i`` (top-left aligned, like SDPA, also for
            ``L != S``); combines with ``mask``.
        scale: score scale; ``1 / sqrt(d)`` if None.
        dropout_p: probability of dropping an attention weight, in ``[0, 1)``.
        generator: draws the dropout seed; the mask itself is a hash of (seed, row, column),
            regenerated in backward, so the same generator state gives the same mask.
        rel_bias: relative position bias in compact form, shape ``(..., L + S - 1)`` with leading
            dims broadcastable to ``q``'s batch dims (typically ``(H, L + S - 1)``): entry ``t`` is
            added to every score ``(i, j)`` with ``j - i = t - (L - 1)``. Its tiles are read from
            a skewed view, so no ``(L, S)`` bias is ever built or saved; its gradient is the sum
            of the score gradient along each diagonal (reduced to its own shape). Combines with
            ``bias``, ``mask``, ``is_causal`` and dropout. ALiBi and T5 buckets are one-liners
            (Example); slopes or bucket tables get their gradient through it by autograd.
        dropout_batch_offset: index of this batch's first sample in a global batch, so that a
            data-parallel rank draws the masks one process would draw for those samples.

    Returns:
        Tensor ``(..., L, dv)`` in the dtype of ``q`` (the autocast dtype under autocast).

    Raises:
        GradsmithError: on mismatched shapes, dtypes or devices, a non-bool mask, a bias or
            mask that does not broadcast to ``(..., L, S)``, a rel_bias whose last dim is not
            ``L + S - 1`` or whose leading dims do not broadcast to the batch dims,
            ``scale <= 0``, or ``dropout_p`` outside ``[0, 1)``.

    Example:
        >>> q, k, v = torch.randn(2, 4, 16, 8), torch.randn(2, 4, 20, 8), torch.randn(2, 4, 20, 8)
        >>> out = attention(q, k, v, is_causal=True)
        >>> ref = torch.nn.functional.scaled_dot_product_attention(
        ...     q, k, v, attn_mask=torch.ones(16, 20, dtype=torch.bool).tril())
        >>> torch.allclose(out, ref, atol=1e-5)
        True

        ALiBi (learnable slopes) and T5 buckets as compact ``rel_bias`` of shape ``(H, L + S - 1)``:

        >>> L, S = 16, 20
        >>> rel = torch.arange(L + S - 1) - (L - 1)            # the offset j - i of each entry
        >>> slopes = torch.tensor([2.0 ** -h for h in range(1, 5)], requires_grad=True)
        >>> alibi = slopes[:, None] * rel                      # causal ALiBi: -slope * |j - i|
        >>> symmetric = -slopes[:, None] * rel.abs()           # the bidirectional variant
        >>> out = attention(q, k, v, is_causal=True, rel_bias=alibi)
        >>> out.sum().backward()
        >>> slopes.grad.shape
        torch.Size([4])
        >>> table = torch.zeros(4, 32, requires_grad=True)     # T5: a learned value per bucket
        >>> bucket = rel.clamp(-16, 15) + 16                   # any map of j - i to [0, 32)
        >>> out = attention(q, k, v, rel_bias=table[:, bucket])
        >>> dense = table[:, bucket][:, torch.arange(S) - torch.arange(L)[:, None] + L - 1]
        >>> torch.allclose(out, attention(q, k, v, bias=dense), atol=1e-6)
        True
    """
    args.check_qkv(q, k, v)
    full = (*q.shape[:-2], q.shape[-2], k.shape[-2])
    mask = args.check_mask(mask, full, q)
    bias = args.check_bias(bias, full, q.device)
    rel_bias = args.check_rel_bias(rel_bias, full, q.device)
    is_causal, scale, dropout_p, generator, offset = args.check_options(
        is_causal, scale, dropout_p, generator, dropout_batch_offset, q.shape[-1], q.dtype)
    q, k, v = _autocast(q, k, v)
    seed = _draw_seed(generator, q.device) if dropout_p > 0 else None
    fused = rel_bias is None and use_fused(q, k, v, mask, bias, dropout_p)
    out, _ = _AttentionFn.apply(q, k, v, mask, bias, rel_bias, seed, is_causal, scale, dropout_p,
                                offset, DEFAULT_BLOCK, fused)
    return out


class Attention(nn.Module):
    """Multi-head attention on :func:`attention`, with ``nn.MultiheadAttention``'s parameters.

    Same parameter names and initialisation as ``nn.MultiheadAttention`` (``in_proj_weight``,
    ``in_proj_bias``, ``out_proj``) so its ``state_dict`` loads as is. Differences: ``forward``
    returns only the output (no weights are ever materialised), and ``mask`` is True = attend
    (SDPA's convention; ``nn.MultiheadAttention``'s bool ``attn_mask`` is True = blocked).

    Args:
        embed_dim: model width, divisible by ``num_heads``.
        num_heads: number of heads.
        dropout: attention-weight dropout probability in training mode, in ``[0, 1)``.
        bias: add biases to the input and output projections.
        batch_first: inputs are ``(B, L, E)`` instead of ``(L, B, E)``.

    Attributes:
        dropout_batch_offset: index of this module's first sample in the global batch, for
            dropout masks that match a single-process run under data parallelism.

    Example:
        >>> mha = Attention(16, 4, batch_first=True)
        >>> mha(torch.randn(2, 5, 16), is_causal=True).shape
        torch.Size([2, 5, 16])
    """

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, batch_first=False,
                 device=None, dtype=None):
        super().__init__()
        self.embed_dim = check_int("Attention", "embed_dim", embed_dim, min_value=1)
        self.num_heads = check_int("Attention", "num_heads", num_heads, min_value=1)
        if embed_dim % num_heads:
            raise GradsmithError(
                f"Attention: embed_dim must be divisible by num_heads, got embed_dim={embed_dim}"
                f" and num_heads={num_heads}; pick num_heads among the divisors of embed_dim")
        args.check_options(False, None, dropout, None, 0, 1)
        self.dropout = float(dropout)
        self.batch_first = check_bool("Attention", "batch_first", batch_first)
        self.has_bias = check_bool("Attention", "bias", bias)
        factory = {"device": device, "dtype": dtype}
        self.in_proj_weight = nn.Parameter(torch.empty(3 * embed_dim, embed_dim, **factory))
        self.in_proj_bias = (nn.Parameter(torch.empty(3 * embed_dim, **factory)) if bias
                             else None)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **factory)
        self.dropout_batch_offset = 0
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.xavier_uniform_(self.in_proj_weight)
        if self.in_proj_bias is not None:
            nn.init.zeros_(self.in_proj_bias)
            nn.init.zeros_(self.out_proj.bias)

    def forward(self, query, key=None, value=None, *, mask=None, bias=None, is_causal=False,
                generator=None, rel_bias=None):
        """Attend ``query`` to ``key``/``value`` (self-attention when they are None).

        ``mask`` and ``bias`` broadcast to ``(B, num_heads, L, S)``: a key padding mask of shape
        ``(B, S)`` is passed as ``mask[:, None, None, :]``. ``rel_bias`` is the compact relative
        position bias of :func:`attention`, e.g. ``(num_heads, L + S - 1)``.
        """
        key = query if key is None else key
        value = key if value is None else value
        for name, t in (("query", query), ("key", key), ("value", value)):
            if not isinstance(t, torch.Tensor) or t.dim() != 3:
                raise GradsmithError(
                    f"Attention: {name} must be a 3-d tensor "
                    f"{'(B, L, E)' if self.batch_first else '(L, B, E)'}, got "
                    f"{tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__}; "
                    f"add a batch dim with unsqueeze")
        if not self.batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        w = self.in_proj_weight.chunk(3)
        b = self.in_proj_bias.chunk(3) if self.in_proj_bias is not None else (None,) * 3
        q, k, v = (self._heads(F.linear(t, wi, bi)) for t, wi, bi in zip((query, key, value), w, b))
        out = attention(q, k, v, mask, bias, is_causal, None,
                        self.dropout if self.training else 0.0, generator, rel_bias,
                        dropout_batch_offset=self.dropout_batch_offset)
        out = self.out_proj(out.transpose(1, 2).flatten(2))
        return out if self.batch_first else out.transpose(0, 1)

    def _heads(self, t):
        batch, length, _ = t.shape
        return t.view(batch, length, self.num_heads, -1).transpose(1, 2).contiguous()

    def __repr__(self) -> str:
        return (f"Attention(embed_dim={self.embed_dim}, num_heads={self.num_heads}, "
                f"dropout={self.dropout}, bias={self.has_bias}, batch_first={self.batch_first})")
