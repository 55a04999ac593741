"""Blockwise attention kernels: online-softmax forward and FlashAttention-2 style backward.

Plain tensor code with no autograd and no Python branching on tensor values, so that the same
functions run eagerly, under ``torch.func.vmap`` (through ``generate_vmap_rule``) and under
``torch.compile(fullgraph=True)``. Shapes: ``q (..., L, d)``, ``k (..., S, d)``, ``v (..., S, dv)``;
``mask`` (bool, True = keep) and ``bias`` broadcast to ``(..., L, S)``; ``rel`` is a compact
relative position bias ``(..., L + S - 1)`` read tile by tile through :mod:`._attention_rel`.

The key dimension is walked in blocks. The forward keeps, per query row, the running maximum
``m``, the running normaliser ``l`` and the unnormalised output, and returns the output and the
row logsumexp ``lse = m + log(l)``: the only statistic the backward needs to rebuild every
probability block as ``exp(s - lse)``. With ``causal`` (top-left aligned, like SDPA), a key block
starting at ``j0`` only touches query rows ``i >= j0``, so those blocks skip the rows above.

Rows whose keys are all masked get output 0 and ``lse = +inf``, so that their recomputed
probabilities are ``exp(-inf) = 0`` and their gradients 0 instead of NaN.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch._C._functorch import is_functorch_wrapped_tensor

from gradsmith.ops._attention_dropout import keep_mask
from gradsmith.ops._attention_rel import (
    add_tile_grad,
    rel_grad,
    rel_table,
    rel_tile,
    zeros_grad_table,
)

_NEG_INF = float("-inf")

# Key-block width. Tuned on a 2-core CPU at L = S = 1024, d = 64 (benchmarks/attention_vs_sdpa.py
# --tune): large enough that each block is a few big matmuls, small enough that the
# (..., L, block) score tile stays a fraction of the full L x S matrix.
DEFAULT_BLOCK = 256


def accumulation_dtype(dtype: torch.dtype) -> torch.dtype:
    """Softmax statistics and accumulators run in float32 for half and bfloat16 inputs."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def can_work_in_place(*tensors) -> bool:
    """In-place updates of score tiles save an allocation and a memory pass per op, but under
    torch.func transforms a tile may be less batched than the operand written into it, and
    out= variants have no batching rule: then work out of place."""
    if torch.compiler.is_compiling():  # functional code for the compiler, which fuses it anyway
        return False
    return not any(t is not None and is_functorch_wrapped_tensor(t) for t in tensors)


def _tile(t: torch.Tensor, r0: int, j0: int, j1: int) -> torch.Tensor:
    """Rows ``r0:`` and key columns ``j0:j1`` of a tensor broadcastable to (..., L, S)."""
    if t.shape[-1] != 1:
        t = t[..., j0:j1]
    if t.dim() >= 2 and t.shape[-2] != 1 and r0 > 0:
        t = t[..., r0:, :]
    return t


def _scores(qs, k, mask, bias, rel, causal, r0, j0, j1, acc_dtype, inplace, out=None):
    """Masked, biased scores of query rows ``r0:`` against keys ``j0:j1``.

    ``rel`` is None or the skewed table of :func:`._attention_rel.rel_table`.
    """
    s = _mm(qs[..., r0:, :], k[..., j0:j1, :].transpose(-2, -1), out)
    if s.dtype != acc_dtype:
        s = s.to(acc_dtype)
    for extra in (bias if bias is None else _tile(bias, r0, j0, j1),
                  rel if rel is None else rel_tile(rel, k.shape[-2], qs.shape[-2], r0, j0, j1)):
        if extra is not None:
            s = s.add_(extra) if inplace else s + extra
    if mask is not None:
        drop = ~_tile(mask, r0, j0, j1)
        s = s.masked_fill_(drop, _NEG_INF) if inplace else s.masked_fill(drop, _NEG_INF)
    if causal and j1 - 1 > r0:
        rows = torch.arange(r0, qs.shape[-2], device=s.device).unsqueeze(-1)
        cols = torch.arange(j0, j1, device=s.device)
        s = s.masked_fill_(cols > rows, _NEG_INF) if inplace else s.masked_fill(
            cols > rows, _NEG_INF)
    return s


def _blocks(L: int, S: int, causal: bool, block: int):
    """(r0, j0, j1) for every key block that touches at least one query row."""
    for j0 in range(0, S, block):
        r0 = j0 if causal else 0
        if r0 < L:
            yield r0, j0, min(j0 + block, S)


def _dropout_scale(s, dropout, r0, j0, j1):
    """Multiplier ``keep / (1 - p)`` for the tile, regenerated from the counter-based hash."""
    keys, threshold, p = dropout
    keep = keep_mask(keys[..., r0:, :], j0, j1, threshold)
    return keep.to(s.dtype) * (1.0 / (1.0 - p))


class _Scratch:
    """Reusable buffers for the score-sized tiles of one call (eager, unbatched path only).

    A fresh multi-megabyte tensor per block costs page faults that take as long as the matmul
    that fills it (measured on this CPU: the QK^T block product runs 2x faster into a reused
    buffer), so each role (scores, dP, ...) gets one flat buffer viewed to the tile's shape.
    """

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self._bufs: dict[str, torch.Tensor] = {}

    def take(self, role: str, shape, like: torch.Tensor):
        if not self.enabled:
            return None
        n = math.prod(shape)
        buf = self._bufs.get(role)
        if buf is None or buf.numel() < n:
            buf = self._bufs[role] = torch.empty(n, dtype=like.dtype, device=like.device)
        return buf[:n].view(shape)


def _mm(a, b, out=None):
    return torch.matmul(a, b) if out is None else torch.matmul(a, b, out=out)


def _scratch(inplace: bool, q: torch.Tensor) -> _Scratch:
    return _Scratch(inplace and q.dtype == accumulation_dtype(q.dtype))


def _tile_shape(q, r0, j1_j0):
    return (*q.shape[:-2], q.shape[-2] - r0, j1_j0)


def attention_forward(q, k, v, mask, bias, rel, causal, scale, dropout, block=DEFAULT_BLOCK):
    """Blockwise forward; returns ``(out, lse)`` with ``lse`` in the accumulation dtype.

    ``rel`` is None or the compact relative bias ``(..., L + S - 1)``; ``dropout`` is None or
    ``(row_keys, threshold, p)`` from :mod:`._attention_dropout`.
    """
    L, S = q.shape[-2], k.shape[-2]
    acc_dtype = accumulation_dtype(q.dtype)
    inplace = can_work_in_place(q, k, mask, bias, rel)
    table = None if rel is None else rel_table(rel, min(block, S), acc_dtype)
    scratch = _scratch(inplace, q)
    qs = q * scale
    # Without dropout the row sums come out of the P V product for free: V gets a ones column.
    fold_sum = dropout is None and q.dtype == acc_dtype
    v_src = _with_column(v, 1.0) if fold_sum else v
    m = torch.full(q.shape[:-1], _NEG_INF, dtype=acc_dtype, device=q.device)
    l_sum = torch.zeros(q.shape[:-1], dtype=acc_dtype, device=q.device)
    acc = torch.zeros((*q.shape[:-1], v_src.shape[-1]), dtype=acc_dtype, device=q.device)
    for r0, j0, j1 in _blocks(L, S, causal, block):
        out_s = scratch.take("s", _tile_shape(q, r0, j1 - j0), q)
        s = _scores(qs, k, mask, bias, table, causal, r0, j0, j1, acc_dtype, inplace, out_s)
        m_old = m[..., r0:]
        m_new = torch.maximum(m_old, s.amax(-1))
        m_safe = m_new.masked_fill(m_new == _NEG_INF, 0.0)
        p = s.sub_(m_safe.unsqueeze(-1)).exp_()
        alpha = (m_old - m_safe).exp()
        p_sum = None if fold_sum else p.sum(-1)
        if dropout is not None:
            z = _dropout_scale(p, dropout, r0, j0, j1)
            p = p.mul_(z) if inplace else p * z
        out_pv = scratch.take("pv", (*q.shape[:-2], L - r0, v_src.shape[-1]), q)
        pv = _mm(p.to(v.dtype), v_src[..., j0:j1, :], out_pv).to(acc_dtype)
        if scratch.enabled:
            if p_sum is not None:
                l_sum[..., r0:].mul_(alpha).add_(p_sum)
            acc[..., r0:, :].mul_(alpha.unsqueeze(-1)).add_(pv)
            m[..., r0:] = m_new
        else:
            if p_sum is not None:
                l_sum = _put_rows(l_sum, l_sum[..., r0:] * alpha + p_sum, r0)
            acc = _put_rows(acc, acc[..., r0:, :] * alpha.unsqueeze(-1) + pv, r0, matrix=True)
            m = _put_rows(m, m_new, r0)
    if fold_sum:
        l_sum, acc = acc[..., -1], acc[..., :-1]
    empty = l_sum == 0
    out = acc / l_sum.masked_fill(empty, 1.0).unsqueeze(-1)
    lse = (m + l_sum.log()).masked_fill(empty, float("inf"))
    return out.to(q.dtype), lse


def _with_column(t, value):
    """``t`` with one more feature column: ``value`` (a scalar or a (..., n) tensor)."""
    col = torch.full((*t.shape[:-1], 1), value, dtype=t.dtype, device=t.device) if isinstance(
        value, float) else value.unsqueeze(-1).to(t.dtype)
    return torch.cat([t, col], dim=-1)


def _put_rows(full, rows, r0, matrix=False):
    """``full`` with its rows ``r0:`` replaced by ``rows`` (out of place, vmap friendly)."""
    if r0 == 0:
        return rows
    head = full[..., :r0, :] if matrix else full[..., :r0]
    return torch.cat([head, rows], dim=-2 if matrix else -1)


def attention_backward(q, k, v, out, lse, dout, mask, bias, rel, causal, scale, dropout,
                       need_dbias, need_drel, block=DEFAULT_BLOCK):
    """Blockwise backward; returns ``(dq, dk, dv, dbias, drel)`` (the last two None unless
    needed).

    With ``P = exp(S - lse)``, ``Z`` the dropout keep-scale and ``D = rowsum(dO * O)``:
    ``dV = (P Z)^T dO``, ``dP = (dO V^T) Z``, ``dS = P (dP - D)``, ``dQ = scale dS K``,
    ``dK = scale dS^T Q``, ``dBias = dS`` summed to the bias's shape, ``dRel[t]`` = the sum of
    ``dS`` over the diagonal ``j - i = t - (L - 1)``, summed to the rel bias's shape.
    """
    L, S = q.shape[-2], k.shape[-2]
    acc_dtype = accumulation_dtype(q.dtype)
    inplace = can_work_in_place(q, k, v, mask, bias, rel, out, lse, dout)
    table = None if rel is None else rel_table(rel, min(block, S), acc_dtype)
    dtable = zeros_grad_table(table) if need_drel else None
    scratch = _scratch(inplace, q)
    qs = q * scale
    # contiguous once: an expanded grad (from .sum()) would be copied per block by every matmul
    dout = dout.to(q.dtype).contiguous()
    delta = (dout.to(acc_dtype) * out.to(acc_dtype)).sum(-1)
    # Fold "- lse" into Q K^T and "- D" into dO V^T (an extra column on each side), which saves
    # two full passes over every score tile. Empty rows (lse = +inf) are masked anyway.
    fold = dropout is None and q.dtype == acc_dtype
    if fold:
        q_src = _with_column(qs, -lse.masked_fill(lse == float("inf"), 0.0))
        k_src = _with_column(k, 1.0)
        do_src = _with_column(dout, -delta)
        v_src = _with_column(v, 1.0)
    else:
        q_src, k_src, do_src, v_src = qs, k, dout, v
    dq = torch.zeros(q.shape, dtype=acc_dtype, device=q.device)
    dk_blocks, dv_blocks, dbias_parts = [], [], []
    # The common dense bias (..., L, S) of the scores' own trailing shape: each block's gradient
    # is reduced straight into its columns of one buffer (no per-block tiles, no final cat).
    dbias_full = None
    if need_dbias and scratch.enabled and bias.dtype == acc_dtype and not causal and (
            bias.shape == (*q.shape[q.dim() - bias.dim():-2], L, S)):
        dbias_full = torch.empty(bias.shape, dtype=acc_dtype, device=q.device)
    for r0, j0, j1 in _blocks(L, S, causal, block):
        tile = _tile_shape(q, r0, j1 - j0)
        s = _scores(q_src, k_src, mask, bias, table, causal, r0, j0, j1, acc_dtype, inplace,
                    scratch.take("s", tile, q))
        p = s.exp_() if fold else s.sub_(lse[..., r0:].unsqueeze(-1)).exp_()
        do_rows = dout[..., r0:, :]
        zscale = _dropout_scale(p, dropout, r0, j0, j1) if dropout is not None else None
        pz = p if zscale is None else p * zscale
        # (dO^T P)^T rather than P^T dO: the same product, ~15% faster with MKL on these shapes
        dv_blocks.append(torch.matmul(do_rows.transpose(-2, -1), pz.to(v.dtype)).transpose(-2, -1))
        dp = _mm(do_src[..., r0:, :], v_src[..., j0:j1, :].transpose(-2, -1),
                 scratch.take("dp", tile, q)).to(acc_dtype)
        if zscale is not None:
            dp = dp.mul_(zscale) if inplace else dp * zscale
        if fold:  # dp already holds dP - D
            ds = dp.mul_(p) if inplace else dp * p
        else:
            d_rows = delta[..., r0:].unsqueeze(-1)
            ds = dp.sub_(d_rows).mul_(p) if inplace else (dp - d_rows) * p
        ds_c = ds.to(q.dtype)
        dq_rows = _mm(ds_c, k[..., j0:j1, :], scratch.take("dq", (*tile[:-1], q.shape[-1]), q))
        if scratch.enabled:
            dq[..., r0:, :].add_(dq_rows)
        else:
            dq = dq + (F.pad(dq_rows, (0, 0, r0, 0)) if r0 else dq_rows).to(acc_dtype)
        dk_blocks.append(torch.matmul(qs[..., r0:, :].transpose(-2, -1), ds_c).transpose(-2, -1))
        if dbias_full is not None:
            lead = tuple(range(ds.dim() - bias.dim()))
            if lead:
                torch.sum(ds, dim=lead, out=dbias_full[..., j0:j1])
            else:
                dbias_full[..., j0:j1].copy_(ds)
        elif need_dbias:
            dbias_parts.append((j0, j1, _reduce_to_bias(ds, bias.shape, r0)))
        if need_drel:
            dtable = add_tile_grad(dtable, ds, rel.shape, S, L, r0, j0, inplace)
    dk = _fill_blocks(dk_blocks, k, S)
    dv = _fill_blocks(dv_blocks, v, S)
    dq = (dq * scale).to(q.dtype)
    if dbias_full is not None:
        dbias = dbias_full
    else:
        dbias = _assemble_dbias(dbias_parts, bias, S) if need_dbias else None
    drel = rel_grad(dtable, rel.shape[-1], inplace).to(rel.dtype) if need_drel else None
    return dq, dk.to(k.dtype), dv.to(v.dtype), dbias, drel


def _fill_blocks(blocks, like, S):
    """Concatenate per-block key gradients; causal blocks past the last query row are zero."""
    done = sum(b.shape[-2] for b in blocks)
    if done < S:
        blocks = [*blocks, torch.zeros_like(like[..., done:, :])]
    return torch.cat(blocks, dim=-2) if len(blocks) > 1 else blocks[0]


def _reduce_to_bias(ds, bias_shape, r0):
    """Sum a (..., L - r0, block) score gradient to the matching tile of the bias's shape."""
    rows_full = len(bias_shape) >= 2 and bias_shape[-2] != 1
    target = list(bias_shape)
    if target[-1] != 1:
        target[-1] = ds.shape[-1]
    if rows_full:
        target[-2] = ds.shape[-2]
    red = ds.sum_to_size(target)
    if rows_full and r0:
        red = F.pad(red, (0, 0, r0, 0))
    return red


def _assemble_dbias(parts, bias, S):
    """Bias gradient from per-block partial sums, in the bias's shape and dtype."""
    if bias.shape[-1] == 1:
        total = parts[0][2]
        for _, _, red in parts[1:]:
            total = total + red
        return total.to(bias.dtype)
    tiles = [red for _, _, red in parts]
    covered = parts[-1][1]
    if covered < S:
        tail = list(tiles[0].shape)
        tail[-1] = S - covered
        tiles.append(tiles[0].new_zeros(tail))
    return torch.cat(tiles, dim=-1).to(bias.dtype)


__all__ = ["DEFAULT_BLOCK", "accumulation_dtype", "attention_backward", "attention_forward"]
