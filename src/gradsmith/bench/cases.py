"""The benchmark registry: every catalog op next to the reference a user would otherwise write.

Each :class:`BenchCase` pairs a gradsmith op with its reference or anchor (plain PyTorch,
``F.scaled_dot_product_attention``, ``torch.utils.checkpoint``, PyTorch's learnable
fake-quantize, torchsort when it is installed) on the same inputs. Sizes follow the targets of
the catalog issues; ``quick=True`` shrinks every input so a full pass takes seconds (CI, tests).
Ops that are not in :mod:`gradsmith.functional` (yet) are left out, so the registry always
matches the installed catalog.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

__all__ = ["BenchCase", "registry"]


@dataclass(frozen=True)
class BenchCase:
    """One op and its reference, called with the same inputs.

    Attributes:
        name: unique name on the command line (``gradsmith bench NAME``).
        op: the gradsmith op, ``op(*inputs)``.
        reference: the reference or anchor, ``reference(*inputs)``.
        reference_name: how the table labels the reference.
        make_inputs: ``quick -> inputs``; fresh leaf tensors on every call.
        shape: human-readable problem size for ``quick=False`` and ``quick=True``.
        hooks_visible: False when an op manages saved tensors itself (its own
            ``saved_tensors_hooks``, like checkpointing), so an outer hook cannot count them; the
            report then gives no saved-bytes figure instead of a misleading 0.
        note: shown with the row (why there is no reference, how the reference differs).

    ``reference`` is ``None`` when the reference is not available here (torchsort not
    installed): the row then shows the op's own numbers and no ratio, never a comparison with a
    stand-in of gradsmith's own.
    """

    name: str
    op: Callable[..., Any]
    reference: Callable[..., Any] | None
    reference_name: str
    make_inputs: Callable[[bool], Sequence[Any]]
    shape: tuple[str, str]
    hooks_visible: bool = True
    note: str | None = None

    def inputs(self, quick: bool) -> Sequence[Any]:
        return self.make_inputs(quick)


def _randn(*shape: int, seed: int = 0, scale: float = 1.0, grad: bool = True) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=gen) * scale).requires_grad_(grad)


_BIG, _SMALL = 4 * 1024 * 1024, 4096


def _elementwise(scale: float = 1.0) -> Callable[[bool], tuple]:
    return lambda quick: (_randn(_SMALL if quick else _BIG, scale=scale),)


def _with(*extra: Any, scale: float = 1.0) -> Callable[[bool], tuple]:
    return lambda quick: (_randn(_SMALL if quick else _BIG, scale=scale), *extra)


_ELEM = ("4M", "4096")


def _part1(G) -> list[BenchCase]:
    cases = []

    def add(name, ref, ref_name, make, shape=_ELEM, op=None):
        fn = op or getattr(G, name.split("-")[0], None)
        if fn is not None:
            cases.append(BenchCase(name, fn, ref, ref_name, make, shape))

    add("clipped_relu", lambda x, c: torch.clamp(x, 0.0, c), "torch.clamp", _with(6.0, scale=4))
    add("swish", lambda x, b: x * torch.sigmoid(b * x), "x*sigmoid(b*x)", _with(1.0))
    add("scaled_sigmoid", lambda x, s: s * torch.sigmoid(x), "s*torch.sigmoid", _with(2.0))
    add("soft_round", _soft_round_paper, "paper formula", _with(5.0, scale=3))
    add("soft_threshold", lambda x, t: torch.sign(x) * torch.relu(x.abs() - t),
        "sign*relu(|x|-t)", _with(0.5))
    add("gelu", F.gelu, "F.gelu", _elementwise())
    add("silu", F.silu, "F.silu", _elementwise())
    add("sign_ste", lambda x: x + (torch.sign(x) - x).detach(), "detach trick", _elementwise())
    add("round_ste", lambda x: x + (torch.round(x) - x).detach(), "detach trick",
        _elementwise(3.0))
    add("gumbel_softmax", lambda x: F.gumbel_softmax(x, 1.0),
        "F.gumbel_softmax", lambda q: (_randn(64 if q else 4096, 1024),), ("4096x1024", "64x1024"))
    add("grad_scale", lambda x, a: a * x + (1 - a) * x.detach(), "detach trick", _with(0.5))
    add("grad_reverse", lambda x, a: -a * x + (1 + a) * x.detach(), "detach trick", _with(1.0))
    add("stop_gradient", torch.Tensor.detach, "Tensor.detach", _elementwise())
    add("fused_linear_relu", lambda x, w, b: F.relu(F.linear(x, w, b)), "F.relu(F.linear)",
        lambda q: (_randn(64 if q else 4096, 1024), _randn(1024, 1024, seed=1, scale=0.03),
                   _randn(1024, seed=2)), ("4096x1024 @ 1024x1024", "64x1024 @ 1024x1024"))
    add("fused_add_relu", lambda x, y: torch.relu(x + y), "torch.relu(x + y)",
        lambda q: (_randn(_SMALL if q else _BIG), _randn(_SMALL if q else _BIG, seed=1)))
    add("logsumexp", torch.logsumexp, "torch.logsumexp",
        lambda q: (_randn(64 if q else 4096, 1024), 1), ("4096x1024, dim=1", "64x1024, dim=1"))
    add("batch_norm", lambda x, eps: F.batch_norm(x, None, None, training=True, eps=eps),
        "F.batch_norm(training=True)", lambda q: (_randn(8 if q else 64, 64, 8 if q else 32,
                                                         8 if q else 32), 1e-5),
        ("64x64x32x32", "8x64x8x8"))
    return cases


def _soft_round_paper(x, alpha):
    m = torch.floor(x)
    return m + 0.5 + torch.tanh(alpha * (x - m - 0.5)) / (2 * math.tanh(alpha / 2))


def _attention_cases(G) -> list[BenchCase]:
    if not hasattr(G, "attention"):
        return []

    def qkv(quick: bool, bias: bool = False):
        L = 64 if quick else 1024
        q, k, v = (_randn(4, 4, L, 64, seed=i) for i in range(3))
        return (q, k, v, _randn(4, L, L, seed=3)) if bias else (q, k, v)

    def qkv_rel(quick: bool):
        """q, k, v, a compact relative bias (4, 2L-1) and the dense (4, L, L) leaf it stands for
        (the same values): ours reads the first, SDPA the second."""
        q, k, v = qkv(quick)
        L = q.shape[-2]
        rel = _randn(4, 2 * L - 1, seed=3, grad=False)
        dense = rel[:, torch.arange(L) - torch.arange(L)[:, None] + L - 1].contiguous()
        return q, k, v, rel.requires_grad_(), dense.requires_grad_()

    sdpa = F.scaled_dot_product_attention
    return [
        BenchCase("attention", G.attention, sdpa, "F.scaled_dot_product_attention", qkv,
                  ("4x4x1024x64", "4x4x64x64")),
        BenchCase("attention-bias", lambda q, k, v, b: G.attention(q, k, v, bias=b),
                  lambda q, k, v, b: sdpa(q, k, v, attn_mask=b),
                  "SDPA (float mask, math path)", lambda quick: qkv(quick, bias=True),
                  ("4x4x1024x64 + bias 4x1024x1024", "4x4x64x64 + bias")),
        BenchCase("attention-rel-bias", lambda q, k, v, r, _: G.attention(q, k, v, rel_bias=r),
                  lambda q, k, v, _, b: sdpa(q, k, v, attn_mask=b),
                  "SDPA (dense float mask, math path)", qkv_rel,
                  ("4x4x1024x64 + rel_bias 4x2047", "4x4x64x64 + rel_bias")),
    ]


def _checkpoint_cases(G) -> list[BenchCase]:
    if not hasattr(G, "checkpoint_sequential"):
        return []
    from torch.utils.checkpoint import checkpoint_sequential as torch_checkpoint

    layers: dict[bool, torch.nn.Sequential] = {}

    def model(quick: bool) -> torch.nn.Sequential:
        if quick not in layers:
            width = 64 if quick else 1024
            torch.manual_seed(0)
            blocks = [m for _ in range(8) for m in (torch.nn.Linear(width, width), torch.nn.ReLU())]
            layers[quick] = torch.nn.Sequential(*blocks)
        return layers[quick]

    def make(quick: bool):
        return (model(quick), _randn(32 if quick else 512, 64 if quick else 1024))

    return [BenchCase(
        "checkpoint_sequential", lambda m, x: G.checkpoint_sequential(m, x, segments=4),
        lambda m, x: torch_checkpoint(m, 4, x, use_reentrant=False),
        "torch.utils.checkpoint (non-reentrant)", make,
        ("8x Linear(1024)+ReLU, batch 512, 4 segments", "8x Linear(64)+ReLU, batch 32"),
        hooks_visible=False)]


def _soft_sort_cases(G) -> list[BenchCase]:
    if not hasattr(G, "soft_rank"):
        return []
    anchor = _torchsort()
    note = None if anchor is not None else (
        "torchsort is not installed, so there is no reference to compare with: "
        "pip install torchsort (it builds from source) and re-run")
    cases = []
    for op_name in ("soft_rank", "soft_sort"):
        op = getattr(G, op_name)
        ref = getattr(anchor, op_name) if anchor is not None else None
        for n in (1000, 10000):
            cases.append(BenchCase(
                f"{op_name}-8x{n}", op, ref,
                "torchsort" if anchor is not None else "torchsort (not installed)",
                lambda quick, n=n: (_randn(8, 64 if quick else n),), (f"8x{n}", "8x64"),
                note=note))
    return cases


def _torchsort():
    if importlib.util.find_spec("torchsort") is None:
        return None
    import torchsort

    return torchsort


def _quant_cases(G) -> list[BenchCase]:
    if not hasattr(G, "fake_quantize_lsq"):
        return []

    def lsq_inputs(quick: bool):
        return (_randn(_SMALL if quick else _BIG), torch.tensor([0.05], requires_grad=True))

    def lsq_reference(x, scale):
        grad_factor = 1.0 / math.sqrt(x.numel() * 127)
        return torch._fake_quantize_learnable_per_tensor_affine(
            x, scale, torch.zeros(1, device=x.device), -128, 127, grad_factor)

    def pact_inputs(quick: bool):
        return (_randn(_SMALL if quick else _BIG, scale=3), torch.tensor(4.0, requires_grad=True))

    return [
        BenchCase("fake_quantize_lsq", lambda x, s: G.fake_quantize_lsq(x, s, 8), lsq_reference,
                  "torch._fake_quantize_learnable_per_tensor_affine", lsq_inputs, _ELEM),
        BenchCase("pact", lambda x, a: G.pact(x, a, 8), lambda x, a: G.pact_surrogate(x, a, 8),
                  "plain PyTorch (clamp + detach-round)", pact_inputs, _ELEM),
    ]


def registry() -> dict[str, BenchCase]:
    """Every benchmark case for the installed catalog, by name, in catalog order.

    Example:
        >>> cases = registry()
        >>> "soft_rank-8x1000" in cases and cases["logsumexp"].reference_name
        'torch.logsumexp'
    """
    import gradsmith.functional as G

    cases = [*_part1(G), *_attention_cases(G), *_checkpoint_cases(G), *_soft_sort_cases(G),
             *_quant_cases(G)]
    return {case.name: case for case in cases}
