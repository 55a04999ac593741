"""A corpus of custom autograd Functions with known verdicts, for the checker's tests.

Each module defines ``CASES``: a list of :class:`Case`. Buggy Functions name the finding code
the checker must report; correct but tricky Functions (kinks, straight-through estimators,
random forwards, float32 inputs, in-place with mark_dirty ...) must pass, sometimes with an
expected info/warning code.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass
class Case:
    """One corpus entry.

    Attributes:
        name: readable test id.
        fn: Function class, ``.apply`` or callable.
        make_args: zero-argument factory of the example arguments.
        passes: expected ``report.passed``.
        codes: finding codes of which at least one must be reported (errors for a failing
            case; info/warning codes for a passing one); empty: no requirement.
        surrogate: forwarded to ``check``.
        options: forwarded to ``check``.
    """

    name: str
    fn: Any
    make_args: Callable[[], tuple]
    passes: bool
    codes: tuple[str, ...] = ()
    surrogate: Any = None
    options: dict[str, Any] = field(default_factory=dict)


def randn(*shape: int, seed: int = 0, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """A seeded standard-normal tensor (float64 unless ``dtype``): the corpus's example inputs."""
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def all_cases() -> list[Case]:
    from corpus import (
        bugs_gradients,
        bugs_more,
        bugs_state,
        bugs_structure,
        complex_fns,
        correct,
        estimators,
        module_args,
        multi_output,
        random_backwards,
        reroutes,
        seeds,
    )

    return [*bugs_gradients.CASES, *bugs_structure.CASES, *bugs_state.CASES, *bugs_more.CASES,
            *correct.CASES, *seeds.CASES, *estimators.CASES,
            *multi_output.CASES, *complex_fns.CASES, *module_args.CASES,
            *random_backwards.CASES, *reroutes.CASES]
