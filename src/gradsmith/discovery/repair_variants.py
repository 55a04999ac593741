"""Other input sets for inputs repaired from forward's errors: each flag flipped (private).

Repaired inputs come with no variants, so a Function whose defect shows only with a documented
option turned on (``save_kernel=True`` returning a slice of the grid instead of the Gram matrix,
then backward raising) PASSed on its default. :func:`flag_variants` flips each bool argument the
repair did not itself choose, one at a time, and keeps a set only when forward runs on it; the
check then runs on every set kept, as it does for synthesised variants.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gradsmith.discovery.probe import probe
from gradsmith.discovery.variants import Variant

__all__ = ["flag_variants"]


def flag_variants(call: Callable[..., Any], args: list, parts: list[str],
                  chosen: set[int]) -> tuple[Variant, ...]:
    """A :class:`Variant` for each bool in ``args`` (not in ``chosen``: the repair's own
    choices) flipped, on which forward runs."""
    found = []
    for i, value in enumerate(args):
        if type(value) is not bool or i in chosen:
            continue
        trial = _fresh(args)
        trial[i] = not value
        if probe(call, trial) is not True:
            continue
        name = parts[i].split(":", 1)[0].split("=", 1)[0]
        shown = [*parts[:i], f"{name}={not value!r}", *parts[i + 1:]]
        found.append(Variant(tuple(_fresh(trial)), ", ".join(shown), f"{name}={not value!r}"))
    return tuple(found)


def _fresh(args: list) -> list:
    """The same values, tensors copied (a probe may have accumulated into their graph)."""
    import torch

    return [a.detach().clone().requires_grad_(a.requires_grad)
            if isinstance(a, torch.Tensor) else a for a in args]
