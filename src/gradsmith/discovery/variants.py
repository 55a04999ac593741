"""Other input sets for a forward that ran on synthesised inputs: variants (private).

One set of inputs hides bugs: float hyperparameters at a non-default value, a mode selector's
other values, optional tensors absent and present, other shapes and a size-1 broadcast
dimension, each kept only when the forward runs on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gradsmith.discovery.build import NONCONTIGUOUS, PLANTED, build_args
from gradsmith.discovery.defaults import tolerance_like
from gradsmith.discovery.halves import even_last, halves_sizes
from gradsmith.discovery.layouts import RESIZE, broadcast_layout, shapes_text
from gradsmith.discovery.probe import kernel_backward_misfits, probe
from gradsmith.discovery.rank_branches import unbatched
from gradsmith.discovery.slots import Slot


@dataclass(frozen=True)
class Variant:
    """Another set of inputs for the same forward, and what differs from the first set."""

    args: tuple
    description: str
    change: str


def variants_of(call, slots: list[Slot], layout, seed: int, positive: bool, primary: list,
              dtype: str = "float64"):
    """Other input sets the forward accepts: hyperparameters, optional tensors, shapes, a
    non-contiguous index, values at a realistic scale (``3 * randn``)."""
    candidates: list[tuple[str, dict[str, Any], Any]] = []
    # Tolerances stay at their value: a backward may drop terms below an epsilon on purpose,
    # and at a larger one that is a deliberate difference, not a defect.
    floats = {s.name: s.value for s in slots if s.kind == "value"
              and isinstance(s.value, float) and not tolerance_like(s.name, s.value)}
    if floats:
        changed = {k: (v * 1.5 if v else 0.5) for k, v in floats.items()}
        candidates.append((", ".join(f"{k}={v!r}" for k, v in changed.items()), changed, layout))
    for slot in slots:  # a mode selector: each other value the code compares it with
        if slot.kind in ("value", "scalar") and slot.hint is not None \
                and slot.value in slot.hint.literals:
            for other in list(dict.fromkeys(slot.hint.literals))[:4]:
                if other != slot.value and type(other) is type(slot.value):
                    candidates.append((f"{slot.name}={other!r}", {slot.name: other}, layout))
    candidates += _modes_together(slots, layout)
    for slot in slots:  # a flag the code reads as a pair (`a, b = ensure_list(flag, 2)`)
        if slot.kind == "value" and type(slot.value) is bool and slot.hint is not None \
                and slot.hint.pair == 2:
            for pair in ((True, False), (False, True)):
                candidates.append((f"{slot.name}={pair!r} (the code unpacks it into two "
                                   "flags)", {slot.name: pair}, layout))
    for slot in slots:  # an FFT length below the signal's: the transform crops it
        axis = slot.hint.fft_axis if slot.hint is not None else None
        if axis is None or slot.kind != "value" or type(slot.value) is not int or not layout:
            continue
        first = tuple(layout[0])
        if -len(first) <= axis < len(first) and first[axis] > 1 and slot.value >= first[axis]:
            shorter = first[axis] - 1
            candidates.append((f"{slot.name}={shorter} (an FFT length below the signal's "
                               f"{first[axis]} along axis {axis}: the transform crops it)",
                               {slot.name: shorter}, layout))
    optional = [s for s in slots if s.optional_tensor]
    for slot in optional:
        for shape in _optional_shapes(call, primary, layout):
            candidates.append((f"{slot.name} given: {dtype} {shape}", {slot.name: shape}, layout))
    for slot in (s for s in slots if s.omittable):
        candidates.append((f"{slot.name}=None", {slot.name: None}, layout))
    tensors = [i for i, s in enumerate(s for s in slots if s.kind in ("tensor", "none"))]
    if tensors:
        resized = tuple(tuple(RESIZE.get(d, d + 1) for d in shape) for shape in layout)
        if halves_sizes(call):  # head_dim // 2 in its kernels: an odd one leaves a column
            resized = even_last(resized, layout)
        names = [s.name for s in slots if s.kind == "tensor"]
        if resized != layout:
            candidates.append((f"other shapes: {shapes_text(names, resized)}", {}, resized))
        broadcast = broadcast_layout(layout, len(names))
        if broadcast is not None:
            candidates.append((f"size-1 dimension: {shapes_text(names, broadcast)}", {},
                               broadcast))
        candidates += _aspects(slots, layout) + unbatched(call, layout)
    indices = {s.name: NONCONTIGUOUS for s in slots if s.kind == "index"
               and not getattr(s.hint, "sequences", False)}  # label lists: built as rows
    if indices:  # idx.view(-1) in backward fails on a transposed index
        candidates.append((f"non-contiguous index: {', '.join(indices)}", indices, layout))
    for slot in (s for s in slots if s.kind == "tensor" and s.sentinel is not None):
        # an element equal to what forward compares it with: its special path runs
        other = slot.sentinel if isinstance(slot.sentinel, str) else repr(slot.sentinel)
        candidates.append((f"sentinel planted: {slot.name} == {other}",
                           {slot.name: PLANTED}, layout))
    spread = [s.name for s in slots if s.kind == "tensor" and not (
        s.hint and (s.hint.probability or s.hint.domain is not None))]
    seen_optional: set[str] = set()
    optional_names = {s.name for s in slots if s.optional_tensor}
    misfit: list[bool] = []  # whether the primary misfits, probed once when asked
    for change, overrides, lay, scale in [(*c, 1.0) for c in candidates] + (
            [(f"values 3 * randn: {', '.join(spread)}", {}, layout, 3.0)]
            if spread and not positive else []):
        opt = next((k for k, v in overrides.items() if isinstance(v, tuple)
                    and k in optional_names), None)  # an optional tensor's shape
        if opt is not None and opt in seen_optional:
            continue
        args, _ = build_args(slots, lay, seed, positive, overrides, dtype, scale)
        ran = probe(call, args, any(s.kind == "function" for s in slots))
        if isinstance(ran, str) or (scale != 1.0 and ran is not True):
            continue  # at a wider scale, only where forward stays finite: its domain
        # A shape its kernels cannot take; a value-only change on a layout that misfits as the
        # primary's does (a weight (3, 4) a kernel reads as (4,)) is checked on the layout
        # backward returns, as the primary is: kept (an int code's other values).
        if kernel_backward_misfits(call, tuple(args)) and not (
                lay is layout and _misfits(call, primary, misfit)):
            continue
        if opt is not None:
            seen_optional.add(opt)
        args, parts = build_args(slots, lay, seed, positive, overrides, dtype, scale)
        yield Variant(tuple(args), ", ".join(parts), change)


def _modes_together(slots: list[Slot], layout) -> list[tuple[str, dict[str, Any], Any]]:
    """Two or more named options changed together, the k-th other word of each: a defect that
    shows only for one boundary with a higher spline order (a prefilter that is the identity
    at orders 0 and 1) is missed by changing one option at a time."""
    others: dict[str, list[str]] = {}
    for slot in slots:
        if slot.kind == "value" and isinstance(slot.value, str) and slot.hint is not None \
                and slot.value in slot.hint.literals:
            words = [w for w in dict.fromkeys(slot.hint.literals)
                     if isinstance(w, str) and w != slot.value]
            if words:
                others[slot.name] = words
    if len(others) < 2:
        return []
    found = []
    for k in range(3):
        changed = {name: words[min(k, len(words) - 1)] for name, words in others.items()}
        text = ", ".join(f"{name}={word!r}" for name, word in changed.items())
        found.append((f"{text} (options together)", changed, layout))
    return found


def _aspects(slots: list[Slot], layout) -> list[tuple[str, dict[str, Any], Any]]:
    """A matrix a decomposition or solve takes (``svd``, ``qr``, ``pinv``: ``hint.aspect``) in
    the aspects the primary lacks, tall, wide and square: a backward right for wide matrices
    only (the null-space term of ``svd``'s vectors, needed when ``m > n``, left out) passes
    on wide ones."""
    tensors = [s for s in slots if s.kind in ("tensor", "none")]
    found = []
    for i, slot in enumerate(tensors):
        shape = tuple(layout[min(i, len(layout) - 1)]) if layout else ()
        if slot.kind != "tensor" or slot.hint is None or not slot.hint.aspect or len(shape) < 2:
            continue
        low, high = sorted(shape[-2:])
        high = high if high > low else low + 1
        for word, (m, n) in (("tall", (high, low)), ("wide", (low, high)),
                             ("square", (low, low))):
            if (m, n) == shape[-2:]:
                continue
            shapes = [tuple(layout[min(j, len(layout) - 1)]) for j in range(len(tensors))]
            shapes[i] = (*shape[:-2], m, n)
            found.append((f"{word} matrix: {slot.name} {shapes[i]} (a decomposition takes "
                          "every aspect)", {}, tuple(shapes)))
    return found


def _misfits(call, primary: list, cache: list[bool]) -> bool:
    if not cache:
        cache.append(kernel_backward_misfits(call, tuple(primary)))
    return cache[0]


def _optional_shapes(call, primary: list, layout) -> list[tuple[int, ...]]:
    """Shapes to try for an optional tensor: the output's last dim, the first input's shape."""
    import torch

    shapes: list[tuple[int, ...]] = []
    import warnings

    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = call(*primary)
        first = out[0] if isinstance(out, (tuple, list)) else out
        if isinstance(first, torch.Tensor) and first.dim() >= 1:
            shapes.append((first.shape[-1],))
    except Exception:  # noqa: BLE001 - the primary ran once; a second failure adds nothing
        pass
    if layout and tuple(layout[0]) not in shapes:
        shapes.append(tuple(layout[0]))
    shapes.append(())
    return shapes
