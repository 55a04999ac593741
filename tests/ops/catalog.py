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
    OpCase("gelu", G.gelu, lambda d, g: (randn(4, 5, dtype=d, gen=g, scale=2.0),), F.gelu),
    OpCase("silu", G.silu, lambda d, g: (randn(4, 5, dtype=d, gen=g, scale=2.0),), F.silu),
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
    OpCase("stop_gradient", G.stop_gradient, lambda d, g: (randn(4, 5, dtype=d, gen=g),),
           lambda x: x.clone(), surrogate=lambda x: x.detach() + 0.0 * x),
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
    OpCase("batch_norm", G.batch_norm,
           lambda d, g: (randn(6, 3, dtype=d, gen=g, scale=2.0, shift=1.0), 1e-5),
           lambda x, eps: F.batch_norm(x, None, None, training=True, eps=eps)),
    OpCase("batch_norm-4d", G.batch_norm,
           lambda d, g: (randn(4, 2, 3, 2, dtype=d, gen=g), 1e-3),
           lambda x, eps: F.batch_norm(x, None, None, training=True, eps=eps),
           compile=False),
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
