"""Shared references for the attention tests: seeded inputs, a float64 softmax reference and a
direct call of the blockwise kernels with a tiny key block."""

from __future__ import annotations

import math

import torch

from gradsmith.ops._attention import _AttentionFn

D64 = torch.float64


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


def rand(*shape, g, dtype=D64, grad=True):
    return torch.randn(*shape, generator=g, dtype=dtype).requires_grad_(grad)


def reference(q, k, v, mask=None, bias=None, is_causal=False, scale=None, keep=None, p=0.0):
    """softmax(q k^T * scale + bias) v, masked; fully masked rows give 0; optional dropout mask."""
    L, S = q.shape[-2], k.shape[-2]
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    s = q @ k.transpose(-2, -1) * scale
    if bias is not None:
        s = s + bias
    allowed = torch.ones(L, S, dtype=torch.bool)
    if is_causal:
        allowed = allowed.tril()
    if mask is not None:
        allowed = allowed & mask
    s = s.masked_fill(~allowed, -math.inf)
    w = torch.softmax(s, dim=-1).nan_to_num(0.0)
    if keep is not None:
        w = w * keep / (1 - p)
    return w @ v


def run_blocks(q, k, v, mask=None, bias=None, is_causal=False, scale=None, block=3, rel=None):
    """The blockwise kernels (never the fused path) with ``block`` keys per tile; the positional
    arguments follow :func:`gradsmith.functional.attention`'s."""
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    return _AttentionFn.apply(q, k, v, mask, bias, rel, None, is_causal, scale, 0.0, 0, block,
                              False)[0]
