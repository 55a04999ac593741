"""Inputs shaped the way a Function's code says, when no guessed layout fits (private).

For kernel libraries whose host code checks what it is given (then no guessed layout runs:
:func:`inputs_from_code` is synthesis's last resort) or checks nothing (then forward runs on a
guess its kernels' backward rejects: :func:`stated_if_misfit` replaces it). The shapes the code states (:mod:`~gradsmith.discovery.stated`) become sizes, one per
dimension name (distinct names get distinct sizes, a dimension defined by an equality gets its
value, ``...`` one leading dimension shared by every tensor that has it); a parameter named
like a tensor (``scale``, ``weight``) that the name tables took for a number becomes a tensor;
a section list (``mrope_section``: ints the kernel reads by index) gets parts summing to a
dimension; and a failure message that names the fix (``set allow_fp32=True for FP32``) is
followed once. float64 first, then float32. The first set on which forward runs and backward
accepts its own gradients wins; a second size assignment, when forward runs on it too, is its
variant (sizes changed consistently).
"""

from __future__ import annotations

import ast
import inspect
import re
from typing import Any

from gradsmith.discovery.backward_reads import no_gradient_positions
from gradsmith.discovery.build import build_args
from gradsmith.discovery.hints import Hint
from gradsmith.discovery.layouts import layouts_for
from gradsmith.discovery.placement import device
from gradsmith.discovery.probe import kernel_backward_misfits, probe
from gradsmith.discovery.slots import Slot, plan_slots
from gradsmith.discovery.stated import Statements, read_statements
from gradsmith.discovery.uses import argument_uses

# Tensor-named parameters (a required ``scale`` is a modulation tensor, not 2.0).
_TENSOR_WORDS = ("scale", "shift", "weight", "bias", "gate", "mask", "residual")
# Size assignments tried in turn: the last dimension of the first stated tensor (the hidden
# size kernels tile) gets a power of two, the others small distinct sizes; then powers of two
# throughout, each name a different size from the first assignment (the variant).
_SIZES = (((2, 3, 5, 6, 7, 9), (8,)), ((4, 2, 8, 16, 32, 64), (16,)))
_FIX = re.compile(r"\bset (\w+)\s*=\s*(True|False|-?\d+(?:\.\d+)?)")


def inputs_from_code(fn: Any, params: list[inspect.Parameter], hints: dict[str, Hint],
                     seed: int = 0) -> tuple[tuple, str, tuple] | None:
    """``(args, description, variants)`` shaped as ``fn``'s code states, or None.

    Args:
        fn: the Function class (plain callables state nothing here: None).
        params: its forward's parameters (``ctx`` excluded).
        hints: what its body says about each (:func:`~gradsmith.discovery.hints.forward_hints`).
        seed: seed of the random tensors.
    """
    from gradsmith.discovery.collect import is_function_class

    if not is_function_class(fn):
        return None
    names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    said = read_statements(fn, names)
    frozen = {names[i] for i in no_gradient_positions(fn) if i < len(names)}
    slots = _slots(params, hints, said, frozen, argument_uses(fn, names))
    if slots is None:
        return None
    call = fn.apply
    fallback = None
    for dtype in ("float64", "float32"):  # float32 also when float64's backward fails
        found, clean = _first_running(call, slots, said, seed, dtype)
        if clean:
            return found
        fallback = fallback or found
    return fallback


def stated_if_misfit(fn: Any, params: list[inspect.Parameter], hints: dict[str, Hint],
                     seed: int, found: tuple) -> tuple[tuple, str, tuple] | None:
    """Inputs shaped as the code states, when the guessed ``found`` is a layout its kernels'
    backward rejects (host code that checks no shapes lets forward run on it) and the stated
    one is accepted; None otherwise (``found`` stands)."""
    from gradsmith._triton import launches

    call = getattr(fn, "apply", fn)
    if _documented_ranks_differ(fn, params, found):  # the docstring's shapes, if forward runs
        stated = inputs_from_code(fn, params, hints, seed)
        return stated if stated is not None and probe(call, list(stated[0])) is True else None
    if launches() == 0 or not kernel_backward_misfits(call, found):  # no kernel ran: no probe
        return None
    stated = inputs_from_code(fn, params, hints, seed)
    if stated is None or kernel_backward_misfits(call, stated[0]):
        return None
    return stated


def _documented_ranks_differ(fn: Any, params: list[inspect.Parameter], found: tuple) -> bool:
    """The docstring states every tensor's dimensions (``B: Up projection [out, rank]``) and
    ``found`` gives one of them another number of dimensions: forward ran on a layout it is
    not written for (a 1-D ``B`` broadcasts through ``x @ A.T @ B.T``)."""
    import torch

    from gradsmith.discovery.collect import is_function_class

    if not is_function_class(fn):
        return False
    names = [p.name for p in params][:len(found)]
    said = read_statements(fn, names)
    tensors = [(n, a) for n, a in zip(names, found) if isinstance(a, torch.Tensor)]
    documented = [said.shapes.get(n) for n, _ in tensors
                  if said.where.get(n) == "its docstring" and "..." not in said.shapes[n]]
    return bool(tensors) and len(documented) == len(tensors) and any(
        a.dim() != len(dims) for (_, a), dims in zip(tensors, documented))


def _slots(params, hints, said: Statements, frozen: set[str], uses) -> list[Slot] | None:
    """The plan, changed where the code says more than the name tables: stated and
    tensor-named parameters are tensors, section lists are lists; None when that changes
    nothing (the usual plans were already tried)."""
    slots = plan_slots(params, hints, False, set(), uses)  # config objects, sizes: as usual
    changed = False
    for i, s in enumerate(slots):
        required = next(p for p in params if p.name == s.name).default is inspect.Parameter.empty
        if s.name in said.sections:
            slots[i] = Slot(s.name, "sections", said.sections[s.name], s.hint)
        elif s.name in said.shapes and s.kind not in ("tensor", "none", "index"):
            slots[i] = Slot(s.name, "tensor", hint=s.hint)
        elif required and s.kind in ("value", "scalar") and (s.hint or Hint()).kind in (
                None, "tensor") and any(w in s.name.lower() for w in _TENSOR_WORDS):
            slots[i] = Slot(s.name, "tensor", hint=s.hint)
        else:
            continue
        changed = True
    if said.index_like:
        slots = [Slot(s.name, "index", hint=s.hint) if s.name in said.index_like else s
                 for s in slots]
    changed = changed or bool(said.shapes)
    for s in slots:
        s.frozen = s.name in frozen
    return slots if changed else None


def _first_running(call, slots: list[Slot], said: Statements, seed: int,
                   dtype: str) -> tuple[tuple[tuple, str, tuple] | None, bool]:
    """The first inputs on which forward runs, and whether backward accepted them too."""
    candidates = [_sized(said, slots, sizes) for sizes in _SIZES] if said.shapes else []
    candidates = [c for c in candidates if c is not None]
    if not candidates:  # nothing stated: the usual layouts on the changed plan, rows first
        layouts = sorted(layouts_for(slots), key=lambda lay: len(lay[0]) < 2 if lay else True)
        candidates = [(layout, {}) for layout in layouts]
    fallback = None
    for n, (layout, sizes) in enumerate(candidates):
        for _ in range(3):  # follow a message that names the fix, at most twice
            args, parts = _build(slots, layout, sizes, seed, dtype, said)
            outcome = probe(call, args)
            fix = _FIX.search(outcome) if isinstance(outcome, str) else None
            if not fix or not _apply_fix(slots, fix):
                break
        if outcome is not True:
            continue
        args, parts = _build(slots, layout, sizes, seed, dtype, said)
        found = (tuple(args), ", ".join(parts),
                 tuple(_variants(call, slots, layout, args, candidates[n + 1:], seed, dtype,
                                 said)))
        if not kernel_backward_misfits(call, found[0]):
            return found, True
        fallback = fallback or found
    return fallback, False


def _apply_fix(slots: list[Slot], fix: re.Match) -> bool:
    value = ast.literal_eval(fix.group(2))
    for i, s in enumerate(slots):
        if s.name == fix.group(1) and s.kind == "value" and s.value != value:
            slots[i] = Slot(s.name, "value", value, s.hint, frozen=s.frozen)
            return True
    return False


def _variants(call, slots, layout, args, rest, seed: int, dtype: str, said: Statements):
    """Nothing stated: the usual variants; else the next size assignment, if it runs."""
    from gradsmith.discovery.variants import Variant, variants_of

    if not rest or not rest[0][1]:
        if all(s.kind not in ("sections", "index") for s in slots):
            yield from variants_of(call, slots, layout, seed, False, args, dtype)
        return
    for layout, sizes in rest[:1]:
        args, parts = _build(slots, layout, sizes, seed, dtype, said)
        if probe(call, args) is True and not kernel_backward_misfits(call, tuple(args)):
            args, parts = _build(slots, layout, sizes, seed, dtype, said)
            yield Variant(tuple(args), ", ".join(parts),
                          "other sizes: " + ", ".join(f"{k}={v}" for k, v in sizes.items()))


def _sized(said: Statements, slots: list[Slot], pools) -> tuple[tuple, dict[str, int]] | None:
    """The layout (one shape per tensor slot) for one size assignment, and the sizes."""
    inner, last = (list(p) for p in pools)
    sizes: dict[str, int] = {}
    lasts = {next((d[-1] for d in said.shapes.values() if d), None)}
    for dims in said.shapes.values():
        for d in dims:
            if re.fullmatch(r"[A-Za-z_]\w*", d) and d not in sizes and d not in said.equations:
                pool = last if d in lasts and last else inner
                sizes[d] = pool.pop(0) if pool else 2
    for name, text in said.equations.items():
        value = _evaluate(text, sizes)
        if value is not None and value > 0:
            sizes[name] = value
    lead = 2
    layout = []
    for s in (s for s in slots if s.kind in ("tensor", "none", "index")):
        dims = said.shapes.get(s.name)
        if dims is None:  # unstated: tied to the first stated tensor
            dims = next(iter(said.shapes.values()))
        shape: list[int] = []
        for d in dims:
            if d == "...":
                shape.append(lead)
                continue
            value = _evaluate(d, sizes)
            if value is None:
                return None
            shape.append(value)
        layout.append(tuple(shape))
    return tuple(layout), sizes


def _evaluate(text: str, sizes: dict[str, int]) -> int | None:
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        return None

    def value(n: ast.AST) -> int | None:
        if isinstance(n, ast.Constant) and type(n.value) is int:
            return n.value
        if isinstance(n, ast.Name):
            return sizes.get(n.id)
        if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Add, ast.Mult)):
            a, b = value(n.left), value(n.right)
            if a is None or b is None:
                return None
            return a + b if isinstance(n.op, ast.Add) else a * b
        return None

    return value(node)


def _build(slots: list[Slot], layout, sizes: dict[str, int], seed: int,
           dtype: str, said: Statements | None = None) -> tuple[list, list[str]]:
    """build_args for the tensors and values; index tensors and section lists here, shaped by
    the layout (build_args shapes indices after the first tensor only)."""
    import torch

    plain = [s if s.kind not in ("index", "sections") else Slot(s.name, "value", None)
             for s in slots]
    tensors = [s for s in slots if s.kind in ("tensor", "none", "index")]
    plain_layout = tuple(shape for s, shape in zip(tensors, layout) if s.kind != "index")
    args, parts = build_args(plain, plain_layout or ((3, 4),), seed, dtype=dtype)
    generator = torch.Generator().manual_seed(seed + 1)
    shapes = dict(zip((s.name for s in tensors), layout))
    last = _half_or_whole(slots, layout)
    for i, s in enumerate(slots):
        if s.kind == "index":
            high = min([v for v in sizes.values()] or [2])
            shape = shapes.get(s.name, (2,))
            args[i] = torch.randint(0, high, shape, generator=generator).to(device())
            parts[i] = f"{s.name}: int64 {shape} in [0, {high})"
        elif s.kind == "sections":
            n = int(s.value)
            base = max(1, last // n)
            args[i] = [base] * (n - 1) + [max(1, last - base * (n - 1))]
            parts[i] = f"{s.name}={args[i]!r} (parts summing to {last})"
    for i, s in enumerate(slots):  # where each shape was read, for the Inputs column
        if said is not None and s.name in said.shapes and sizes and args[i] is not None:
            where = said.where[s.name]
            where = where if len(where) < 70 else where[:66] + "...'"
            parts[i] += f" as [{', '.join(said.shapes[s.name])}] (from {where})"
    return args, parts  # build_args placed the tensors (and said where, last)


def _half_or_whole(slots: list[Slot], layout) -> int:
    """What section lists sum to: the first tensor's last dimension, or half of it for rotary
    embeddings (``cos``/``sin`` parameters: each section covers one half's frequencies)."""
    shapes = [shape for shape in layout if shape]
    last = shapes[0][-1] if shapes else 4
    rotary = {"cos", "sin"} <= {s.name for s in slots}
    return last // 2 if rotary and last % 2 == 0 else last
