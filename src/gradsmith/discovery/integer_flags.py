"""A flag synthesis chose that makes forward's output an integer tensor: its other values (private).

A quantiser ``forward(ctx, x, clip, num_bits, dequantize)`` returns uint8 codes with
``dequantize=False`` (the value synthesis gives a bool first) and floats with ``True``, the
way its project calls it; its straight-through backward only ever runs on the floats. An
integer output under a flag value gradsmith invented is no demonstrated harm, so before
:mod:`~gradsmith.discovery.integer_outputs` settles for ``integer-output-backward`` (an
error), :func:`floating_flag` tries each such flag at its other values: a bool flipped, an
int or str mode at the other values the code compares it with. A value on which forward
returns floats and backward runs gives the inputs the check uses, with the integer case as a
warning (:attr:`~gradsmith.discovery.layout_search.Synthesized.integer_flag`). Flags whose
value forward's signature or the project states (a default, a wrapper's keyword) are the
users' own and are never changed: an integer output there is what users get.

:func:`~gradsmith.discovery.layout_search.first_working` calls it only for a plan on which
every layout failed and forward returned integers on one, so a Function whose inputs are found
the usual way pays nothing for it; it runs before the fallback plans, which would otherwise
make the flag a float tensor (truthy) and guess other arguments' kinds.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from gradsmith.discovery.build import build_args
from gradsmith.discovery.defaults import stated_defaults
from gradsmith.discovery.layout_search import Synthesized, first_working
from gradsmith.discovery.layouts import layouts_for
from gradsmith.discovery.slots import Slot, signature

__all__ = ["fixed_names", "floating_flag", "has_flags"]

# Other values tried per mode selector: modes beyond a few are rare, and each costs a search.
_MAX_OTHERS = 3


def fixed_names(owner: Any) -> set[str]:
    """Parameters of forward whose value the code or the project states: a default in
    forward's signature, or one a wrapper or the docstring states (see
    :func:`~gradsmith.discovery.defaults.stated_defaults`).

    Example:
        >>> import torch
        >>> class Q(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x, dequantize, signed=True):
        ...         return x
        >>> sorted(fixed_names(Q))
        ['signed']
    """
    _, params, _ = signature(owner)
    if not params:
        return set()
    given = {p.name for p in params if p.default is not inspect.Parameter.empty}
    return given | set(stated_defaults(owner, [p.name for p in params]))


def floating_flag(call: Callable[..., Any], slots: list[Slot], seed: int,
                  dtype: str = "float64") -> Synthesized | None:
    """Inputs with one synthesised flag of ``slots`` at another value, on which forward returns
    floats and backward runs (the first such flag and value, in parameter order), or None:
    no flag to try, forward returns no integer tensors on ``slots``, or no value helps.

    Args:
        call: the Function's ``apply`` (its class states which values are the users').
        slots: a plan on which forward returned no floating tensor; left as it was.
        seed: seed of the random tensors.
        dtype: floating dtype of the tensors.
    """
    fixed = fixed_names(getattr(call, "__self__", call))
    if not has_flags(slots, fixed) or not (dtypes := _integer_dtypes(call, slots, seed, dtype)):
        return None
    for slot in slots:
        if not _flag(slot, fixed):
            continue
        before = slot.value
        try:
            for other in _others(slot):
                slot.value = other
                found = first_working(call, slots, seed, dtype, flags=False)
                if isinstance(found, Synthesized) and not found.doubt:
                    said = f"{slot.name}={before!r}"
                    return replace(found, description=(
                        f"{found.description} ({slot.name}={other!r} chosen: with {said} "
                        f"every output is {dtypes}, where backward never runs)"),
                                   integer_flag=f"with {said} every output is {dtypes}")
        finally:
            slot.value = before
    return None


def _integer_dtypes(call: Callable[..., Any], slots: list[Slot], seed: int, dtype: str) -> str:
    """The dtypes of forward's outputs on the first layout where all are integer tensors
    (``"uint8"``), or ``""``: a forward returning numbers, or raising, is no integer output."""
    import warnings

    import torch

    from gradsmith.discovery.integer_outputs import only_integer_tensors

    for layout in layouts_for(slots):
        try:
            with torch.enable_grad(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = call(*build_args(slots, layout, seed, dtype=dtype)[0])
        except Exception:  # noqa: BLE001 - user code: this layout does not fit
            continue
        if only_integer_tensors(out):
            items = out if isinstance(out, (tuple, list)) else (out,)
            return "/".join(sorted({str(o.dtype).removeprefix("torch.") for o in items
                                    if isinstance(o, torch.Tensor)}))
    return ""


def has_flags(slots: list[Slot], fixed: set[str]) -> bool:
    """Whether :func:`floating_flag` has any flag of ``slots`` to try."""
    return any(_flag(slot, fixed) and _others(slot) for slot in slots)


def _flag(slot: Slot, fixed: set[str]) -> bool:
    return slot.name not in fixed and slot.kind in ("value", "scalar")


def _others(slot: Slot) -> list[Any]:
    """The values a flag is tried at: a bool's other one; an int or str mode's other values
    the code compares it with (``if mode == "codes":``), of the same type."""
    value = slot.value
    if type(value) is bool:
        return [not value]
    literals = slot.hint.literals if slot.hint is not None else []
    if type(value) not in (int, str) or value not in literals:
        return []  # a number the code never compares (num_bits=8) is no mode
    others = [v for v in dict.fromkeys(literals) if type(v) is type(value) and v != value]
    return others[:_MAX_OTHERS]
