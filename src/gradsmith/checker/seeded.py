"""Backward's gradients at a fixed random state and a fixed incoming gradient (private).

Two checks compare backward's answers on two input sets and must see the same randomness on
both: forward runs at torch seed 0 (a dropout mask drawn alike), and grad_output is drawn from
a generator of its own, so a difference is the inputs', not the draws'.
"""

from __future__ import annotations

from typing import Any


def seeded_grads(fn: Any, call: list, leaves: list, seed: int) -> tuple | None:
    """Gradients of ``fn``'s differentiable outputs on ``call`` with respect to ``leaves``
    (None where one is unused), forward at torch seed 0 and grad_output drawn (float64, cast to
    each output's dtype) from a generator seeded ``seed``; None where forward or backward
    raises. ``fn`` is a Function class (``apply``) or a callable."""
    import torch

    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            out = fn.apply(*call) if isinstance(fn, type) else fn(*call)
        outs = [o for o in (out if isinstance(out, (tuple, list)) else (out,))
                if isinstance(o, torch.Tensor) and o.requires_grad]
        gen = torch.Generator().manual_seed(seed)
        vs = [torch.randn(o.shape, generator=gen, dtype=torch.float64).to(o.dtype)
              for o in outs]
        return torch.autograd.grad(outs, leaves, vs, allow_unused=True)
    except Exception:  # noqa: BLE001 - a backward that does not run shows nothing here
        return None
