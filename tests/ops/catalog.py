"""The op catalog as test data: one :class:`OpCase` per public op.

The conformance suite (``test_conformance.py``, harness in ``conformance.py``) is parametrised
over ``CATALOG``: values and gradients against a plain-PyTorch reference, second derivatives,
vmap against a loop, torch.compile against eager, autocast, dtypes and ``gradsmith.check``.

Adding an op: append an ``OpCase`` to your block below. ``make_args(dtype, gen)`` must be
deterministic given the seeded generator ``gen`` (the harness calls it once per evaluation to get
fresh tensors); every floating-point tensor it returns is differentiated. ``reference`` is plain
PyTorch with the same signature. Estimators give ``surrogate``: the smooth function whose autograd
gradient the op's backward must equal (the reference still checks the forward value).

This module holds data only (no import of ``conformance``), so pytest's doctest collection can
import it on its own.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

import gradsmith.functional as G

FLOATS = (torch.float32, torch.float64, torch.bfloat16)


@dataclass(frozen=True)
class OpCase:
    """One op under test.

    Attributes:
        id: readable test id.
        fn: the public function under test.
        make_args: ``(dtype, gen) -> tuple`` of positional arguments.
        reference: plain-PyTorch function with the same signature (forward value; also the
            gradient reference unless ``surrogate`` is given).
        surrogate: gradient reference for estimators (straight-through, gradient scaling).
        once_differentiable: backward is ``@once_differentiable``: skip second-order tests.
        random: the op draws from the global RNG: op and references run under the same seed.
        vmap: run the vmap-against-a-loop test. ``vmap_randomness`` is passed to vmap.
        compile: run the torch.compile(fullgraph=True) test.
        dtypes: dtypes the op supports.
        check_options: extra options for ``gradsmith.check``.
    """

    id: str
    fn: Callable[..., Any]
    make_args: Callable[[torch.dtype, torch.Generator], tuple]
    reference: Callable[..., Any]
    surrogate: Callable[..., Any] | None = None
    once_differentiable: bool = False
    random: bool = False
    vmap: bool = True
    vmap_randomness: str = "error"
    compile: bool = True
    dtypes: tuple[torch.dtype, ...] = FLOATS
    check_options: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.id


def randn(*shape: int, dtype: torch.dtype, gen: torch.Generator, scale: float = 1.0,
          shift: float = 0.0) -> torch.Tensor:
    """Seeded normal tensor, drawn in float64 then cast (same values for every dtype)."""
    return (torch.randn(*shape, generator=gen, dtype=torch.float64) * scale + shift).to(dtype)


CATALOG: list[OpCase] = []

# --- part 1: activations, estimators, fused, reductions ---
# References are plain PyTorch (torch / torch.nn.functional), written independently of the ops.


def _rand(*shape: int, dtype: torch.dtype, gen: torch.Generator, low: float, high: float):
    u = torch.rand(*shape, generator=gen, dtype=torch.float64)
    return (low + (high - low) * u).to(dtype)


def _soft_round_paper(x, alpha):
    # Agustsson & Theis (2020), eq. for s_alpha: m + tanh(alpha r) / (2 tanh(alpha / 2)) + 1/2
    # with m = floor(x) and r = x - m - 1/2.
    m = torch.floor(x)
    r = x - m - 0.5
    return m + 0.5 + torch.tanh(alpha * r) / (2 * math.tanh(alpha / 2))


def _straight_through(x, clip=None):
    return x if clip is None else torch.clamp(x, -clip, clip)


def _gumbel_soft(x, tau, hard, dim, gen):
    # Straight-through surrogate of the hard sample: the soft sample with the same noise.
    return F.gumbel_softmax(x, tau, hard=False, dim=dim)


def _scaled_identity(x, alpha):
    return alpha * x + (1 - alpha) * x.detach()


CATALOG += [
    OpCase("clipped_relu", G.clipped_relu,
           lambda d, g: (randn(4, 5, dtype=d, gen=g, scale=4.0), 6.0),
           lambda x, c: torch.clamp(x, 0.0, c)),
    OpCase("clipped_relu-clip1.5", G.clipped_relu,
           lambda d, g: (randn(3, 4, dtype=d, gen=g, scale=2.0), 1.5),
           lambda x, c: torch.clamp(x, 0.0, c),
           compile=False),
    OpCase("swish", G.swish, lambda d, g: (randn(4, 5, dtype=d, gen=g, scale=2.0), 1.5),
           lambda x, b: x * torch.sigmoid(b * x)),
    OpCase("swish-tensor-beta", G.swish,
           lambda d, g: (randn(3, 4, dtype=d, gen=g, scale=2.0),
                         randn(1, 4, dtype=d, gen=g, scale=0.5, shift=1.0)),
           lambda x, b: x * torch.sigmoid(b * x)),
    OpCase("scaled_sigmoid", G.scaled_sigmoid,
           lambda d, g: (randn(4, 5, dtype=d, gen=g, scale=2.0), 2.5),
           lambda x, s: s * torch.sigmoid(x)),
    OpCase("soft_round", G.soft_round, lambda d, g: (randn(4, 5, dtype=d, gen=g, scale=3.0), 5.0),
           _soft_round_paper),
    OpCase("soft_round-alpha0.5", G.soft_round,
           lambda d, g: (randn(4, 5, dtype=d, gen=g, scale=3.0), 0.5), _soft_round_paper,
           compile=False),
    OpCase("soft_threshold", G.soft_threshold,
           lambda d, g: (randn(4, 5, dtype=d, gen=g), 0.5),
           lambda x, t: torch.sign(x) * torch.relu(x.abs() - t)),
    OpCase("soft_threshold-tensor", G.soft_threshold,
           lambda d, g: (randn(4, 5, dtype=d, gen=g),
                         _rand(1, 5, dtype=d, gen=g, low=0.1, high=0.8)),
           lambda x, t: torch.sign(x) * torch.relu(x.abs() - t)),
    OpCase("sign_ste", G.sign_ste, lambda d, g: (randn(4, 5, dtype=d, gen=g),),
           torch.sign, surrogate=_straight_through),
    OpCase("sign_ste-clip", G.sign_ste, lambda d, g: (randn(4, 5, dtype=d, gen=g, scale=2.0), 1.0),
           lambda x, c: torch.sign(x), surrogate=_straight_through),
    OpCase("round_ste", G.round_ste, lambda d, g: (randn(4, 5, dtype=d, gen=g, scale=3.0),),
           torch.round, surrogate=lambda x: x),
    OpCase("gumbel_softmax", G.gumbel_softmax,
           lambda d, g: (randn(3, 5, dtype=d, gen=g), 0.7, False, -1, None),
           lambda x, tau, hard, dim, gen: F.gumbel_softmax(x, tau, hard, dim=dim),
           random=True, vmap_randomness="same"),
    OpCase("gumbel_softmax-hard", G.gumbel_softmax,
           lambda d, g: (randn(3, 5, dtype=d, gen=g), 0.5, True, -1, None),
           lambda x, tau, hard, dim, gen: F.gumbel_softmax(x, tau, hard, dim=dim),
           surrogate=_gumbel_soft, random=True, vmap_randomness="same"),
    OpCase("gumbel_softmax-hard-dim0", G.gumbel_softmax,
           lambda d, g: (randn(4, 3, dtype=d, gen=g), 2.0, True, 0, None),
           lambda x, tau, hard, dim, gen: F.gumbel_softmax(x, tau, hard, dim=dim),
           surrogate=_gumbel_soft, random=True, vmap_randomness="same",
           compile=False),
    OpCase("grad_scale", G.grad_scale, lambda d, g: (randn(4, 5, dtype=d, gen=g), 0.25),
           lambda x, a: x.clone(), surrogate=_scaled_identity),
    OpCase("grad_reverse", G.grad_reverse, lambda d, g: (randn(4, 5, dtype=d, gen=g), 0.7),
           lambda x, a: x.clone(), surrogate=lambda x, a: _scaled_identity(x, -a)),
    OpCase("fused_linear_relu", G.fused_linear_relu,
           lambda d, g: (randn(4, 3, dtype=d, gen=g), randn(5, 3, dtype=d, gen=g),
                         randn(5, dtype=d, gen=g)),
           lambda x, w, b: F.relu(F.linear(x, w, b))),
    OpCase("fused_linear_relu-nobias-3d", G.fused_linear_relu,
           lambda d, g: (randn(2, 4, 3, dtype=d, gen=g), randn(5, 3, dtype=d, gen=g), None),
           lambda x, w, b: F.relu(F.linear(x, w, b))),
    OpCase("fused_add_relu", G.fused_add_relu,
           lambda d, g: (randn(4, 5, dtype=d, gen=g), randn(4, 5, dtype=d, gen=g)),
           lambda x, y: F.relu(x + y)),
    OpCase("fused_add_relu-broadcast", G.fused_add_relu,
           lambda d, g: (randn(4, 5, dtype=d, gen=g), randn(5, dtype=d, gen=g)),
           lambda x, y: F.relu(x + y)),
    OpCase("logsumexp", G.logsumexp, lambda d, g: (randn(4, 5, dtype=d, gen=g, scale=3.0), 1),
           lambda x, dim: torch.logsumexp(x, dim)),
    OpCase("logsumexp-dims-keepdim", G.logsumexp,
           lambda d, g: (randn(3, 4, 2, dtype=d, gen=g, scale=3.0), (0, 2), True),
           lambda x, dim, keep: torch.logsumexp(x, dim, keep)),
]


# --- part 2 ---

# part 2a: attention (checkpoint_sequential takes layers, not tensors: tests/ops/test_checkpoint.py)
def _attention_reference(q, k, v, mask=None, bias=None, is_causal=False, scale=None,
                         dropout_p=0.0):
    """Explicit softmax(q k^T * scale + bias) v; fully masked rows give 0. With dropout, the
    keep mask is drawn from the same seed the op draws (global RNG) and the same hash."""
    from gradsmith.ops._attention_dropout import keep_mask, row_keys, threshold

    L, S = q.shape[-2], k.shape[-2]
    s = q @ k.transpose(-2, -1) * (q.shape[-1] ** -0.5 if scale is None else scale)
    s = s if bias is None else s + bias
    allowed = torch.ones(L, S, dtype=torch.bool)
    allowed = allowed.tril() if is_causal else allowed
    allowed = allowed if mask is None else allowed & mask
    w = torch.softmax(s.masked_fill(~allowed, -math.inf), dim=-1).nan_to_num(0.0)
    if dropout_p:
        seed = torch.randint(0, 2**32, (), dtype=torch.int64)
        keep = keep_mask(row_keys(seed, tuple(q.shape[:-2]), L, 0, q.device), 0, S,
                         threshold(dropout_p))
        w = w * keep / (1 - dropout_p)
    return w @ v


def _attention_mask(L, S):
    mask = torch.rand(L, S, generator=torch.Generator().manual_seed(L * S)) > 0.3
    mask[1] = False  # a fully masked row
    return mask


# once_differentiable is invisible to the checker through the public function: no second order
_ATTENTION_CHECK = {"checks": ("structure", "mutation", "gradients", "forward_ad", "vmap",
                               "robustness", "randomness", "hygiene")}

CATALOG += [
    OpCase("attention", G.attention,
           lambda d, g: (randn(2, 2, 5, 4, dtype=d, gen=g), randn(2, 2, 5, 4, dtype=d, gen=g),
                         randn(2, 2, 5, 3, dtype=d, gen=g)),
           _attention_reference, once_differentiable=True, check_options=_ATTENTION_CHECK),
    OpCase("attention-mask-bias-causal-L<S", G.attention,
           lambda d, g: (randn(2, 3, 4, dtype=d, gen=g), randn(2, 6, 4, dtype=d, gen=g),
                         randn(2, 6, 4, dtype=d, gen=g), _attention_mask(3, 6),
                         randn(2, 3, 6, dtype=d, gen=g), True),
           _attention_reference, once_differentiable=True, check_options=_ATTENTION_CHECK),
    OpCase("attention-dropout-L>S", G.attention,
           lambda d, g: (randn(2, 6, 4, dtype=d, gen=g), randn(2, 4, 4, dtype=d, gen=g),
                         randn(2, 4, 2, dtype=d, gen=g), None, None, False, 0.8, 0.25),
           _attention_reference, once_differentiable=True, random=True,
           vmap_randomness="same", check_options=_ATTENTION_CHECK),
]


# part 2b: soft sorting and quantization. The soft sort references run a plain sequential PAV
# (Python floats decide the blocks) and compute block values with differentiable torch ops, so
# they give reference gradients; they share no code with the ops' vectorised/native solvers.
def _pav_blocks(y, w=None):
    """Blocks (start, end) of the decreasing isotonic fit of y (l2), or of (y, w) (kl)."""
    stack = []  # [start, end, a, b]: value a / b (l2) or a - b as log-sum-exps (kl)
    for i, yi in enumerate(y):
        stack.append([i, i + 1, yi, 1.0 if w is None else w[i]])
        while len(stack) > 1:
            (_, _, a0, b0), (_, e1, a1, b1) = stack[-2], stack[-1]
            if (a0 / b0 if w is None else a0 - b0) > (a1 / b1 if w is None else a1 - b1):
                break
            stack.pop()
            stack[-1][1] = e1
            if w is None:
                stack[-1][2:] = [a0 + a1, b0 + b1]
            else:
                stack[-1][2:] = [float(torch.tensor([a0, a1]).logsumexp(0)),
                                 float(torch.tensor([b0, b1]).logsumexp(0))]
    return [(a, b) for a, b, _, _ in stack]


def _block_values(y, w=None):
    blocks = _pav_blocks(y.tolist(), None if w is None else w.tolist())
    if w is None:
        return torch.cat([y[a:b].mean().expand(b - a) for a, b in blocks])
    return torch.cat([(y[a:b].logsumexp(0) - w[a:b].logsumexp(0)).expand(b - a)
                      for a, b in blocks])


def _soft_rank_reference(x, regularization="l2", regularization_strength=1.0):
    rows = []
    for row in x.double().reshape(-1, x.shape[-1]):
        n = row.numel()
        s, perm = (row / regularization_strength).sort(descending=True)
        w = torch.arange(n, 0, -1, dtype=torch.float64)
        if regularization == "l2":
            r = s - _block_values(s - w)
        else:
            r = (s - _block_values(s, w.log())).exp()
        rows.append(torch.empty_like(r).scatter(0, perm, r))
    return torch.stack(rows).reshape(x.shape).to(x.dtype)


def _soft_sort_reference(x, regularization="l2", regularization_strength=1.0):
    rows = []
    for row in x.double().reshape(-1, x.shape[-1]):
        n = row.numel()
        s, _ = (-row).sort(descending=True)
        w = torch.arange(n, 0, -1, dtype=torch.float64) / regularization_strength
        sol = _block_values(w - s) if regularization == "l2" else _block_values(w, s)
        rows.append(sol - w)
    return torch.stack(rows).reshape(x.shape).to(x.dtype)


def _spread(*shape, dtype, gen):
    """Distinct values at least 0.3 apart (no ties, no near-kinks for finite differences)."""
    n = math.prod(shape)
    codes = torch.randperm(n, generator=gen).double() * 0.37
    noise = torch.rand(n, generator=gen, dtype=torch.float64) * 0.05
    return (codes + noise - 0.37 * n / 2).reshape(shape).to(dtype)


def _lsq_args(d, g, bits=4, signed=True):
    qn, qp = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2 ** bits - 1)
    codes = torch.randint(qn - 3, qp + 4, (4, 5), generator=g).double()
    offsets = torch.rand(4, 5, generator=g, dtype=torch.float64) * 0.6 - 0.3
    scale = 0.25
    return ((codes + offsets) * scale).to(d), torch.tensor(scale, dtype=d), bits, signed


def _lsq_value_reference(x, scale, bits=8, signed=True, grad_scale=None):
    qn, qp = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2 ** bits - 1)
    return (x / scale).round().clamp(qn, qp) * scale


def _pact_args(d, g):
    x = torch.rand(4, 5, generator=g, dtype=torch.float64) * 6 - 1
    return x.to(d), torch.tensor(3.3, dtype=d), 3


def _pact_value_reference(x, alpha, bits=8):
    levels = 2 ** bits - 1
    return (torch.minimum(x.clamp(min=0), alpha) * levels / alpha).round() * alpha / levels


# "surrogate" replaces "gradients" for an op that declares one: without it nothing compares
# backward with the declaration and the verdict is INCOMPLETE
_STE_CHECK = {"checks": ("structure", "mutation", "gradients", "surrogate", "forward_ad", "vmap",
                         "robustness", "randomness", "hygiene")}

CATALOG += [
    OpCase("soft_rank-l2", G.soft_rank, lambda d, g: (_spread(3, 6, dtype=d, gen=g),),
           _soft_rank_reference),
    OpCase("soft_rank-kl-3d", G.soft_rank,
           # strength 3.0: at 0.5 these inputs pool no block, the soft rank is the hard rank and
           # its gradient 0 (not-exercised)
           lambda d, g: (_spread(2, 2, 5, dtype=d, gen=g), "kl", 3.0), _soft_rank_reference),
    OpCase("soft_sort-l2-eps0.3", G.soft_sort,
           lambda d, g: (_spread(3, 6, dtype=d, gen=g), "l2", 0.3), _soft_sort_reference),
    OpCase("soft_sort-kl", G.soft_sort,
           lambda d, g: (_spread(2, 7, dtype=d, gen=g), "kl", 1.0), _soft_sort_reference),
    OpCase("fake_quantize_lsq-4bit", G.fake_quantize_lsq, _lsq_args, _lsq_value_reference,
           surrogate=G.lsq_surrogate, once_differentiable=True, check_options=_STE_CHECK),
    OpCase("fake_quantize_lsq-3bit-unsigned", G.fake_quantize_lsq,
           lambda d, g: _lsq_args(d, g, 3, False), _lsq_value_reference,
           surrogate=G.lsq_surrogate, once_differentiable=True, check_options=_STE_CHECK),
    OpCase("pact-3bit", G.pact, _pact_args, _pact_value_reference,
           surrogate=G.pact_surrogate, once_differentiable=True, check_options=_STE_CHECK),
]
