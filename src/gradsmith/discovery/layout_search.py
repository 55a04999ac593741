"""Search the shape layouts for inputs on which forward runs, and what synthesis returns (private).

:func:`first_working` tries :func:`~gradsmith.discovery.layouts.layouts_for`'s layouts in turn;
a Function whose function arguments only backward calls tries each layout with each function
flavour until forward *and* backward run. :class:`Synthesized` and :class:`NoInputs` are what
:func:`~gradsmith.discovery.synthesize.synthesize` returns.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from gradsmith.discovery.build import build_args
from gradsmith.discovery.callables import flavours
from gradsmith.discovery.layouts import TIME_STATE, layouts_for
from gradsmith.discovery.probe import NOT_FLOATING, backward_error, probe
from gradsmith.discovery.slots import Slot
from gradsmith.discovery.variants import Variant, variants_of


@dataclass(frozen=True)
class Synthesized:
    """Inputs that made the forward run, how they were made, and variants (for the report)."""

    args: tuple
    description: str
    variants: tuple[Variant, ...] = ()
    seed: int = 0
    #: Backward raised on every layout and plan tried with an error about a value's kind, and
    #: some argument's kind was a guess: why, and what to register (see :func:`~gradsmith.discovery.doubt.doubt`). A
    #: backward-error on these inputs is not shown to be the Function's (the row is a skip).
    #: Inside :func:`first_working`, backward's error on the layout returned.
    doubt: str = ""
    #: Called with the checked arguments when the check fails on them: the other candidates
    #: for the arguments that were guesses (see :mod:`~gradsmith.discovery.second_guess`);
    #: ``None`` where the inputs are the project's or the code states them.
    others: Callable[[tuple], tuple] | None = field(default=None, compare=False, repr=False)
    #: A flag synthesis set at another value because at its first one every output was an
    #: integer tensor (``"with dequantize=False every output is uint8"``): the check reports it
    #: as a warning, not as ``integer-output-backward`` (see :mod:`~gradsmith.discovery.integer_flags`).
    integer_flag: str = ""


@dataclass(frozen=True)
class NoInputs:
    """Why no inputs could be synthesised, phrased with the fix."""

    reason: str


def first_working(call, slots: list[Slot], seed: int,
                   dtype: str = "float64", flags: bool = True) -> Synthesized | str:
    """Inputs from the first layout on which forward runs, or the last error. Where forward
    returned only integer tensors and ``flags``, a flag synthesis chose at another value
    (``dequantize=True``, see :mod:`~gradsmith.discovery.integer_flags`)."""
    functions = [s for s in slots if s.kind == "function"]
    if functions:
        return _first_with_functions(call, slots, functions, seed, dtype)
    last_error = "no layout tried"
    fallback: Synthesized | None = None
    integer = False  # forward ran and returned no floating tensor on some layout
    for layout in layouts_for(slots):
        found = on_layout(call, slots, layout, seed, dtype)
        if isinstance(found, Synthesized):
            raised = backward_error(call, found.args)
            if raised is None:
                return found
            fallback = fallback or replace(found, doubt=raised)
            if getattr(raised, "elementwise_mask", False):
                return fallback  # a one-value layout would hide the harm: elementwise_masks
            continue
        last_error = found
        integer = integer or found.endswith(NOT_FLOATING)
    if fallback is None and integer and flags:
        from gradsmith.discovery.integer_flags import floating_flag

        if (flipped := floating_flag(call, slots, seed, dtype)) is not None:
            return flipped
    return fallback or last_error


def _first_with_functions(call, slots: list[Slot], functions: list[Slot], seed: int,
                          dtype: str) -> Synthesized | str:
    """Function arguments that only backward calls: every layout (first the ODE convention,
    a scalar time before the tensors, ``func(t, y)``) with each function returning a tensor
    or a single number, until forward *and* backward run."""
    last_error = "no layout tried"
    counted = None  # the first (layout, flavour) where only backward's gradient count failed
    layouts = list(layouts_for(slots))
    layouts.insert(1, TIME_STATE)
    for layout in dict.fromkeys(layouts):
        for flags in flavours(len(functions)):
            for slot, reduce in zip(functions, flags):
                slot.value = reduce
            found = on_layout(call, slots, layout, seed, dtype, backward=True)
            if isinstance(found, Synthesized):
                return found
            if counted is None and _COUNT in found:
                counted = (layout, flags)
            last_error = found
    if counted is not None:  # backward ran and returned too few or too many values on every
        # flavour tried: the count is the Function's (corpus 11b dev Sparse_grad_attention)
        for slot, reduce in zip(functions, counted[1]):
            slot.value = reduce
        found = on_layout(call, slots, counted[0], seed, dtype)
        if isinstance(found, Synthesized):
            return found
    for slot in functions:  # the suggested decorator shows the plain (tensor-valued) one
        slot.value = False
    return last_error


#: autograd's check of how many values backward returned (after backward ran).
_COUNT = "returned an incorrect number of gradients"


def on_layout(call, slots: list[Slot], layout, seed: int, dtype: str,
               backward: bool = False) -> Synthesized | str:
    """Inputs on ``layout`` if the probe (forward, and backward when asked) runs on them, else
    why it failed."""
    # Standard normal values first; positive ones (0.5 to 1.5) when the output is not
    # finite, for forwards defined on a positive domain only (log, sqrt, pow, ...).
    positive = False
    outcome = probe(call, build_args(slots, layout, seed, positive, dtype=dtype)[0], backward)
    if not isinstance(outcome, str) and not outcome:
        positive = True
        outcome = probe(call, build_args(slots, layout, seed, positive, dtype=dtype)[0], backward)
    if isinstance(outcome, str):
        return outcome
    # Fresh copies: the probe may have modified its inputs, the check must see it.
    args, parts = build_args(slots, layout, seed, positive, dtype=dtype)
    variants = tuple(variants_of(call, slots, layout, seed, positive, args, dtype))
    return Synthesized(tuple(args), ", ".join(parts), variants, seed)

