"""Inputs in the low precision a Function's code casts to itself (private).

A Function written for bfloat16 training (an FP8 matmul that returns ``out_dtype=torch.bfloat16``,
corpus 12d held-out: lingua's ``Fp8LinearFn``) makes bfloat16 tensors of its own; handed
float64 inputs, its backward meets them in a matmul and raises ``expected m1 and m2 to have the
same dtype, but got: c10::BFloat16 != double``. No input was bfloat16, so the code cast to it:
the error is the evidence, and no source needs reading. When backward raises such a mix on
every float64 plan, the plan is tried once more with its floating inputs in that dtype; where
forward and backward then run, those inputs are used and the Inputs column says why. Other
errors, and mixes of the input dtype with float32 (a tensor made without ``dtype=``, which
the check reports), are left as they were.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

#: torch's spellings of the half types in dtype errors, and the dtype each names.
_NAMES = {"BFloat16": "bfloat16", "Half": "float16"}
_MIX = re.compile(r"\b(BFloat16|Half)\b.*\b(double|Double)\b|\b(double|Double)\b.*\b(BFloat16|Half)\b")


def mixed_low_dtype(error: str) -> str | None:
    """The half dtype (``"bfloat16"``, ``"float16"``) that ``error`` says met a float64
    tensor, or None.

    Example:
        >>> mixed_low_dtype("RuntimeError: expected m1 and m2 to have the same dtype, "
        ...                 "but got: c10::BFloat16 != double")
        'bfloat16'
        >>> mixed_low_dtype("RuntimeError: expected scalar type Float but found Double") is None
        True
    """
    found = _MIX.search(str(error or ""))
    if found is None:
        return None
    return _NAMES[found.group(1) or found.group(4)]


def in_low_precision(call: Any, raising: tuple, seed: int) -> Any | None:
    """Inputs in the dtype the code casts to, when backward raised a float64 mix with it on
    ``raising`` (``(found, slots)``, the first float64 plan where forward ran and backward
    raised) and forward and backward both run there; None otherwise."""
    from gradsmith.discovery.layout_search import Synthesized, first_working

    found, slots = raising
    low = mixed_low_dtype(found.doubt)
    if low is None:
        return None
    made = first_working(call, slots, seed, low)
    if not isinstance(made, Synthesized) or made.doubt:
        return None
    said = (f"{low}: the code casts to {low} itself, and on float64 inputs its backward raised "
            f"{_short(found.doubt)}")
    return replace(made, description=f"{made.description} ({said})")


def _short(error: str) -> str:
    text = str(error)
    return text if len(text) <= 120 else text[:117] + "..."
