"""Inputs repaired from what forward's error says, when no layout runs (private).

A forward that rejects synthesised inputs usually says what was wrong with them: "The size of
tensor a (8) must match the size of tensor b (3) at non-singleton dimension 1", "'float' object
has no attribute 'shape'", "shape '[-1, 16]' is invalid for input of size 24", "not enough values
to unpack (expected 4, got 2)". :func:`repair` reads the exception of a failed probe, derives a
few targeted changes to the argument list (resize one tensor's dimension to the size the message
names, add or remove leading dimensions, turn a number into a tensor or an integer, a tensor
into a number, make a size divisible), and probes again. A change is kept when forward then
runs, or fails differently (the next error names the next fix); a few rounds, at most
:data:`BUDGET` probes per Function. The arguments the traceback's frames hold (the forward's
own locals, torch's ``input``) are changed first.

Each change says in the Inputs column what it answered, so a user can read why an argument has
the kind or shape it has.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gradsmith.discovery.build import build_args
from gradsmith.discovery.layouts import layouts_for
from gradsmith.discovery.probe import probe_failure
from gradsmith.discovery.repair_rules import Edit, edits_for, message
from gradsmith.discovery.slots import Slot

__all__ = ["BUDGET", "Repaired", "repair", "repair_plans", "repaired_doubt"]

#: Probes one Function may spend on repairs, the first (failing) probe of each start included.
BUDGET = 12


@dataclass(frozen=True)
class Repaired:
    """Arguments forward runs on, what each says (the Inputs column), and the edits made."""

    args: list
    parts: list[str]
    edits: tuple[Edit, ...]


def repair_plans(call: Callable[..., Any], plans: list[list[Slot]], seed: int
                 ) -> tuple[Repaired, list[Slot]] | None:
    """Repaired inputs from the first layout of the first and the last plan (the name tables'
    and the last fallback's), sharing one budget of :data:`BUDGET` probes, and the plan; None
    when neither start is repaired. Plans with functions only backward calls are left out."""
    budget = [BUDGET]
    starts = [p for i, p in enumerate(plans) if p not in plans[:i]
              and all(s.kind != "function" for s in p)]
    for slots in [*starts[:1], *starts[-1:]][:len(starts)]:
        layout = next(iter(layouts_for(slots)), None)
        if layout is None:
            continue

        def build(slots=slots, layout=layout) -> tuple[list, list[str]]:
            return build_args(slots, layout, seed)

        args, parts = build()
        if len(args) != len(parts):  # *params of modules: one part for several arguments
            continue
        if (found := repair(call, build, seed, budget)) is not None:
            return found, slots
    return None


def repaired_doubt(fn: Any, raised: str, found: Repaired, slots: list[Slot], hints: dict) -> str:
    """Why a backward-error on repaired inputs is not shown to be the Function's: the repair
    made forward run, nothing showed the inputs are of the kinds and shapes backward is
    written for (a per-channel ``clip_lo`` given the input's shape, a ``sigma`` that requires
    grad). The row is a skip with this reason when backward's error is its only error. Where
    every edit gave the kind a typed signature states (``full_matrices`` must be bool), the
    repair guessed nothing a layout does not: synthesis' usual :func:`~.doubt.doubt` decides."""
    from gradsmith.discovery.doubt import doubt
    from gradsmith.discovery.suggestion import no_inputs_reason

    if all(e.stated for e in found.edits):  # a builtin's parser named each kind: no guess
        return doubt(fn, raised, slots, hints, set())  # beyond synthesis' usual ones
    what = ", ".join(dict.fromkeys(_name(found.parts[e.index]) for e in found.edits))
    return no_inputs_reason(
        fn, f"forward ran only on inputs repaired from its own errors ({what}) and backward "
        f"raised on them ({raised}): a repair is a guess, so the error is not shown to be the "
        "Function's", slots, hints, lead="the repaired inputs are not shown to fit")


def _name(part: str) -> str:
    return part.split(":", 1)[0].split("=", 1)[0]


def repair(call: Callable[..., Any], build: Callable[[], tuple[list, list[str]]],
           seed: int, budget: list[int]) -> Repaired | None:
    """Repair the arguments ``build()`` makes until ``call`` runs forward on them, or None.

    Args:
        call: the Function's ``apply`` (or the callable).
        build: fresh arguments and their descriptions (one per argument, same order).
        seed: seed of the tensors the edits make.
        budget: probes left (one element, spent in place: several starts share it).
    """
    edits: list[Edit] = []
    args, parts = _edited(build, edits, seed)
    if budget[0] <= 0:
        return None
    budget[0] -= 1
    _, exc = probe_failure(call, args, complex_ok=True)
    seen = {_state(args)}  # argument lists already probed: a repair never goes round in circles
    while budget[0] > 0 and exc is not None:
        for edit in edits_for(exc, args)[:4]:
            if budget[0] <= 0:
                return None
            trial, _ = _edited(build, [*edits, edit], seed)
            if _state(trial) in seen:
                continue
            seen.add(_state(trial))
            budget[0] -= 1
            new_outcome, new_exc = probe_failure(call, trial, complex_ok=True)
            if new_outcome is True:
                args, parts = _edited(build, [*edits, edit], seed)
                return Repaired(args, parts, (*edits, edit))
            if new_exc is not None and _where(new_exc) != _where(exc) \
                    and not _undoes(edit, args, new_exc, trial):
                edits.append(edit)  # a different error: the next one names the next fix
                args, exc = trial, new_exc
                break
        else:
            return None
    return None


def _where(exc: BaseException) -> tuple:
    """An error's message and the line it was raised on: the same message raised further on
    (``zeros_like(weight_b)`` after ``zeros_like(weight_a)``) is a step forward too."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return message(exc), None if tb is None else (tb.tb_frame.f_code, tb.tb_lineno)


def _state(args: list) -> tuple:
    """What a probe of ``args`` depends on here: each argument's kind and shape or value."""
    import torch

    return tuple((type(a).__name__, a.dtype, tuple(a.shape)) if isinstance(a, torch.Tensor)
                 else (type(a).__name__, repr(a)[:40]) for a in args)


def _undoes(edit: Edit, before: list, exc: BaseException, after: list) -> bool:
    """Whether ``exc`` (raised on ``after``, ``before`` with ``edit``) asks to turn the edited
    argument back into the kind it was (a tensor made an int, then "'int' object is not
    subscriptable"): the edit was wrong, not a step forward."""
    import torch

    was_tensor = isinstance(before[edit.index], torch.Tensor)
    if (edit.kind != "number") == was_tensor:  # the same kind, another shape: no turn back
        return False
    return any(e.index == edit.index and (e.kind != "number") == was_tensor
               for e in edits_for(exc, after))


def _edited(build, edits: list[Edit], seed: int) -> tuple[list, list[str]]:
    """Fresh arguments from ``build`` with ``edits`` applied, and their descriptions."""
    import torch

    args, parts = build()
    # A float object of its own per argument (the same 0.1 may fill several): which argument
    # a frame holds is read by identity (see repair_rules._implicated).
    args = [float(repr(a)) if type(a) is float else a for a in args]
    parts = list(parts)
    for n, edit in enumerate(edits):
        old = args[edit.index]
        name = _name(parts[edit.index])
        generator = torch.Generator().manual_seed(seed + 7919 * (n + 1) + edit.index)
        if edit.kind == "shape":
            dtype = old.dtype if isinstance(old, torch.Tensor) and old.is_floating_point() \
                else torch.float64
            grad = old.requires_grad if isinstance(old, torch.Tensor) else True
            args[edit.index] = torch.randn(edit.value, dtype=dtype, generator=generator
                                           ).to(_device(args)).requires_grad_(grad)
            shown = f"{name}: {str(dtype).removeprefix('torch.')} {tuple(edit.value)}"
        elif edit.kind == "index":
            args[edit.index] = torch.randint(0, edit.high, edit.value, generator=generator
                                             ).to(_device(args))
            shown = f"{name}: int64 {tuple(edit.value)} in [0, {edit.high})"
        elif edit.kind == "wrap":  # a flag forward saves for backward: the same, as a tensor
            args[edit.index] = torch.tensor(edit.value, device=_device(args))
            shown = f"{name}=tensor({edit.value!r})"
        elif edit.kind == "complex":
            dtype = old.dtype.to_complex() if isinstance(old, torch.Tensor) and \
                old.is_floating_point() else torch.complex128
            args[edit.index] = torch.randn(edit.value, dtype=dtype, generator=generator).to(
                _device(args)).requires_grad_(getattr(old, "requires_grad", True))
            shown = f"{name}: {str(dtype).removeprefix('torch.')} {tuple(edit.value)}"
        elif edit.kind == "list":  # a List[int] a schema states (see .repair_lists)
            args[edit.index] = list(edit.value)
            shown = f"{name}={list(edit.value)!r}"
        elif edit.kind == "mask":
            args[edit.index] = (torch.rand(edit.value, generator=generator) < 0.5
                                ).to(_device(args))
            shown = f"{name}: bool {tuple(edit.value)}"
        else:
            args[edit.index] = edit.value
            shown = f"{name}={edit.value!r}"
        parts[edit.index] = f"{shown} (repaired: {edit.why})"
    return args, parts


def _device(args: list) -> Any:
    import torch

    return next((a.device for a in args if isinstance(a, torch.Tensor)), torch.device("cpu"))


