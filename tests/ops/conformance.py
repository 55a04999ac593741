"""Reusable conformance harness for catalog ops (see ``catalog.OpCase``).

Everything here works on a case's ``make_args`` and compares an op with its plain-PyTorch
reference; ``test_conformance.py`` turns it into parametrised tests. Random ops (``case.random``)
run every evaluation under the same global seed, so op and reference see the same noise.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

RANDOM_SEED = 1234

# (atol, rtol) per dtype. bfloat16 has 8 significant bits: a few ulps of relative error.
TOLERANCES = {
    torch.float64: (1e-10, 1e-8),
    torch.float32: (2e-5, 2e-5),
    torch.bfloat16: (2e-2, 3e-2),
}


def make_args(case, dtype: torch.dtype = torch.float64, seed: int = 0) -> tuple:
    """Fresh arguments for ``case``; floating tensors become leaves that require grad."""
    gen = torch.Generator().manual_seed(seed)
    args = case.make_args(dtype, gen)
    return tuple(a.detach().requires_grad_() if _differentiable(a) else a for a in args)


def _differentiable(a: Any) -> bool:
    return isinstance(a, torch.Tensor) and a.is_floating_point()


def tensor_positions(args: Sequence[Any]) -> list[int]:
    """Indices of the differentiable (floating tensor) arguments."""
    return [i for i, a in enumerate(args) if _differentiable(a)]


def call(case, fn: Callable[..., Any], args: Sequence[Any]) -> torch.Tensor:
    """Call ``fn(*args)``; random ops start from the same global seed every time."""
    if case.random:
        torch.manual_seed(RANDOM_SEED)
    return fn(*args)


def cotangent(like: torch.Tensor, seed: int) -> torch.Tensor:
    """A seeded random cotangent (upstream gradient) shaped like ``like``."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(like.shape, generator=gen, dtype=torch.float64).to(like.dtype)


def _grad(outputs, inputs, grad_outputs, create_graph: bool = False):
    return torch.autograd.grad(outputs, inputs, grad_outputs, create_graph=create_graph,
                               allow_unused=True, materialize_grads=True)


def value_and_grads(case, fn: Callable[..., Any], dtype: torch.dtype, seed: int = 0):
    """``(value, grads)``: ``fn``'s output and its VJP with a seeded cotangent."""
    args = make_args(case, dtype, seed)
    inputs = [args[i] for i in tensor_positions(args)]
    out = call(case, fn, args)
    return out.detach(), [g.detach() for g in _grad(out, inputs, cotangent(out, seed + 1))]


def second_order(case, fn: Callable[..., Any], dtype: torch.dtype = torch.float64,
                 seed: int = 0) -> list[torch.Tensor]:
    """Derivatives of ``<VJP(v), w>`` w.r.t. the inputs and the cotangent ``v``.

    These are the Hessian-vector products and the Jacobian-vector product that double backward
    (``create_graph=True``) must get right.
    """
    args = make_args(case, dtype, seed)
    inputs = [args[i] for i in tensor_positions(args)]
    out = call(case, fn, args)
    v = cotangent(out, seed + 1).requires_grad_()
    grads = _grad(out, inputs, v, create_graph=True)
    ws = [cotangent(g, seed + 2 + i) for i, g in enumerate(grads)]
    # A first derivative that does not depend on anything (stop_gradient's zeros) has a zero
    # second derivative: leave it out rather than let autograd raise.
    pairs = [(g, w) for g, w in zip(grads, ws) if g.requires_grad]
    if not pairs:
        return [torch.zeros_like(t).detach() for t in [*inputs, v]]
    grads, ws = zip(*pairs)
    return [g.detach() for g in _grad(grads, [*inputs, v], ws)]


def assert_close(actual, expected, dtype: torch.dtype, what: str, scale: float = 1.0) -> None:
    """``torch.testing.assert_close`` with the harness' per-dtype tolerance (times ``scale``)."""
    atol, rtol = TOLERANCES[dtype]
    if isinstance(actual, torch.Tensor):
        actual, expected = [actual], [expected]
    assert len(actual) == len(expected), f"{what}: {len(actual)} vs {len(expected)} tensors"
    for i, (a, e) in enumerate(zip(actual, expected)):
        torch.testing.assert_close(a, e, atol=atol * scale, rtol=rtol * scale,
                                   msg=lambda m, i=i: f"{what} [{i}]: {m}")


def vmap_and_loop(case, batch: int = 3, shared: bool = False):
    """Outputs and per-sample gradients from ``torch.func.vmap`` and from a Python loop.

    With ``shared=True`` only the first tensor argument is batched and the other tensors
    (weights, learnable beta or threshold) are shared by every sample, as in per-sample-gradient
    computations; otherwise every tensor argument is batched.
    """
    samples = [make_args(case, torch.float64, seed=s) for s in range(batch)]
    first = samples[0]
    all_pos = tensor_positions(first)
    if shared:
        samples = [tuple(s[i] if i == all_pos[0] else first[i] for i in range(len(first)))
                   for s in samples]
    pos = all_pos
    batched = all_pos[:1] if shared else all_pos
    in_dims = tuple(0 if i in batched else None for i in range(len(first)))
    stacked = [torch.stack([s[i].detach() for s in samples]) if i in batched else first[i]
               for i in range(len(first))]
    cot = [cotangent(call(case, case.fn, s), 100 + k) for k, s in enumerate(samples)]

    def scalar(v, *args):
        return (case.fn(*args) * v).sum()

    argnums = tuple(1 + i for i in pos)
    per_sample_grad = torch.func.grad(scalar, argnums=argnums)
    if case.random:
        torch.manual_seed(RANDOM_SEED)
    value_v = torch.func.vmap(case.fn, in_dims, randomness=case.vmap_randomness)(*stacked)
    if case.random:
        torch.manual_seed(RANDOM_SEED)
    grads_v = torch.func.vmap(per_sample_grad, (0, *in_dims),
                              randomness=case.vmap_randomness)(torch.stack(cot), *stacked)
    value_l = torch.stack([call(case, case.fn, s).detach() for s in samples])
    grads_l = []
    for k, s in enumerate(samples):
        out = call(case, case.fn, s)
        grads_l.append(_grad(out, [s[i] for i in pos], cot[k]))
    grads_l = [torch.stack([g[j] for g in grads_l]) for j in range(len(pos))]
    return (value_v, list(grads_v)), (value_l, grads_l)


def split_constants(case, args: Sequence[Any]) -> tuple[list[torch.Tensor], Callable]:
    """Tensors of ``args`` and a function of those tensors alone (constants closed over).

    This is how a model is compiled in practice: hyper-parameters are attributes, tensors flow.
    """
    pos = tensor_positions(args)
    tensors = [args[i] for i in pos]

    def fn_of_tensors(*ts):
        full = list(args)
        for i, t in zip(pos, ts):
            full[i] = t
        return case.fn(*full)

    return tensors, fn_of_tensors
