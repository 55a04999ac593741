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

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

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

# --- part 2 ---
