"""Other candidates for the arguments synthesis guessed, to confirm a FAIL on them (private).

Zero-configuration inputs guess what the code does not state: what a callable computes, an
object's kind, whether an int is a count, a mode or an index, a secondary tensor's shape. A
gradient error found on such a guess may be the guess's, not the Function's (a nonlinear
stand-in for a linear map, a 4-D tensor for a 2-D matrix). :func:`second_guesses` lists input
sets on which only guessed arguments differ from the failing set, each taking another kind or
layout synthesis already knows (0/1 values for a data tensor the code reads as a mask, a
seeded linear map for a callable, another plan, another shape layout, the other function
flavour), and on which forward runs and backward runs: the check re-runs the failing checks
there (:mod:`gradsmith.checkrun.guesses`). It is only called on the failure path, so a
Function that passes pays nothing. The arguments that are the Function's own (the tensors
backward differentiates, values the code states by a default or a hint) never change: a
wrong gradient for them is never excused.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from gradsmith.discovery.callables import flavours
from gradsmith.discovery.slots import Slot

# Kinds whose value synthesis always invents: objects, callables, configuration.
_INVENTED = {"module", "function", "config", "keyed", "distance"}
# At most this many forward + backward probes, seconds of probing, and candidate sets, per
# failing row: a slow forward (an iterative solver) must not turn a verdict into a timeout.
_PROBES = 24
_SECONDS = 3.0
_CANDIDATES = 2


@dataclass(frozen=True)
class Guess:
    """One other candidate: its arguments, and for each guessed argument it changes, what
    that argument was in the failing set and what it is here (as the Inputs column says)."""

    args: tuple
    changed: dict[str, tuple[str, str]]
    #: where the candidate comes from when not another guess (the project's caller)
    source: str = ""

    @property
    def said(self) -> str:
        """``mode: int 2 -> float64 (3, 4)``, one per changed argument."""
        return "; ".join(f"{n}: {was} -> {now}" for n, (was, now) in self.changed.items())


def guessed(slots: list[Slot], given: set[str]) -> list[str]:
    """Names of the arguments whose kind or shape no hint or default states: invented objects
    and callables, numbers no hint names, and tensors backward gives no gradient (data: a
    mask, an index, weights) whose shape no hint states. Tensors backward differentiates are
    the Function's own inputs: never a guess, so a wrong gradient for them is never excused."""
    tensors = [s for s in slots if s.kind == "tensor"]
    names = []
    for s in slots:
        if s.name in given:
            continue
        hint = s.hint
        kind_said = hint is not None and (hint.kind is not None or bool(hint.literals))
        shape_said = s.per_feature or hint is not None and bool(
            hint.rank_min or hint.last_dim is not None or hint.matmul_left_of or hint.matrix
            or hint.leading or hint.projects or hint.unit_dims or hint.rows_of)
        if s.kind in _INVENTED or s.kind == "operator" and getattr(s.value, "shapes", ()) \
                or s.kind in ("value", "scalar", "index") and not kind_said \
                and not isinstance(s.value, bool) or s.kind == "tensor" and s.frozen \
                and s is not tensors[0] and not shape_said:
            names.append(s.name)
    return names


def second_guesses(call, plans: list[list[Slot]], won: list[Slot], failed: tuple, seed: int,
                   dtype: str, given: set[str]) -> list[Guess]:
    """Input sets where only guessed arguments of ``won`` (the plan ``failed`` was built
    from) differ from ``failed``, in kind or shape, and forward and backward run."""
    import time

    from gradsmith.discovery.build import build_args
    from gradsmith.discovery.layouts import layouts_for
    from gradsmith.discovery.operator_shapes import reshaped
    from gradsmith.discovery.probe import backward_error, probe

    names = [s.name for s in won]
    found: list[Guess] = reshaped(call, failed, names)  # a stand-in's shape attributes
    free = set(guessed(won, given))
    if not free or len(failed) != len(names):
        return found
    before = [_kind(a) for a in failed]
    seen: set[tuple] = {tuple(before)}
    probes, started = 0, time.perf_counter()
    masked = _masked(failed, names, free & mask_uses(getattr(call, "__self__", None)))
    if masked is not None and probe(call, list(masked)) is True and \
            backward_error(call, masked) is None:
        found.append(Guess(masked, {n: (b, a) for n, b, a in zip(
            names, before, map(_kind, masked)) if b != a}))
        seen.add(tuple(map(_kind, masked)))
    for plan in [won, _linear(won, free), *plans]:
        if [s.name for s in plan] != names:
            continue
        for variant in _flavoured(plan):
            for layout in layouts_for(variant):
                if time.perf_counter() - started > _SECONDS:
                    return found
                try:
                    args, _ = build_args(variant, layout, seed, dtype=dtype)
                except Exception:  # noqa: BLE001 - a plan that does not build: not a candidate
                    continue
                now = [_kind(a) for a in args]
                if len(args) != len(names) or tuple(now) in seen:
                    continue
                seen.add(tuple(now))
                changed = {n: (b, a) for n, b, a in zip(names, before, now) if b != a}
                if not changed or set(changed) - free:
                    continue  # only guessed arguments may change
                probes += 1
                if probe(call, list(args)) is True and backward_error(call, tuple(args)) is None:
                    fresh, _ = build_args(variant, layout, seed, dtype=dtype)
                    found.append(Guess(tuple(fresh), changed))
                if len(found) >= _CANDIDATES or probes >= _PROBES:
                    return found
    return found


def mask_uses(owner: Any) -> set[str]:
    """Names a Function's forward, setup_context or backward uses as masks: ``m.bool()``,
    ``m == 0`` (``!=``, 1), ``masked_fill(m, ...)``, ``where(m, ...)``, ``x[m]``. A data
    tensor only multiplied (a loss's weights) is no mask: 0/1 values would hide a wrong
    power of it, so it gets no 0/1 candidate.

    Example:
        >>> import torch
        >>> class Keep(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x, keep, w):
        ...         return x * keep * w
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         return g * (keep != 0) * w, None, None
        >>> sorted(mask_uses(Keep))
        ['keep']
    """
    import ast

    from gradsmith.discovery.source import method_trees

    found: set[str] = set()
    for tree in (method_trees(owner) if isinstance(owner, type) else {}).values():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                if node.func.attr == "bool" and isinstance(node.func.value, ast.Name):
                    found.add(node.func.value.id)
                elif node.func.attr in ("masked_fill", "where") and node.args and isinstance(
                        node.args[0], ast.Name):
                    found.add(node.args[0].id)
            elif isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(
                    node.ops[0], (ast.Eq, ast.NotEq)):
                sides = (node.left, node.comparators[0])
                if any(isinstance(x, ast.Constant) and x.value in (0, 1) for x in sides):
                    found |= {x.id for x in sides if isinstance(x, ast.Name)}
            elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Name):
                found.add(node.slice.id)
    return found


def _masked(failed: tuple, names: list[str], free: set[str]) -> tuple | None:
    """``failed`` with each guessed tensor that needs no gradient and that the code uses as a
    mask (:func:`mask_uses`) given 0/1 values (both present), the kind masks.py gives a
    tensor forward uses as a mask. ``None`` when there is none."""
    import torch

    out = list(failed)
    for i, (name, value) in enumerate(zip(names, failed)):
        if name in free and isinstance(value, torch.Tensor) and value.is_floating_point() \
                and not value.requires_grad and value.numel() >= 2:
            out[i] = (torch.arange(value.numel()) % 2).reshape(value.shape).to(value)
    if all(a is b for a, b in zip(out, failed)):
        return None
    return tuple(a.detach().clone().requires_grad_(a.requires_grad)  # forward may write
                 if isinstance(a, torch.Tensor) and a is b else a for a, b in zip(out, failed))


def _linear(plan: list[Slot], free: set[str]) -> list[Slot]:
    """The plan with each guessed callable a linear map (``x @ M.T`` on the last dimension,
    the stand-in a linear operator argument gets): a callable the code uses as a linear
    operator is right there, where a nonlinear stand-in is not."""
    from gradsmith.discovery.operators import Operator

    return [Slot(s.name, "operator", Operator(called=True), s.hint)
            if s.name in free and s.kind in ("function", "module") else s for s in plan]


def _flavoured(plan: list[Slot]):
    """The plan with each combination of function flavours (a tensor-valued function, one
    returning a single number), as the search for forward and backward tries them."""
    functions = [i for i, s in enumerate(plan) if s.kind == "function"]
    if not functions:
        yield plan
        return
    for flags in flavours(len(functions)):
        variant = list(plan)
        for i, flag in zip(functions, flags):
            variant[i] = replace(plan[i], value=flag)
        yield variant


def _kind(value: Any) -> str:
    """What an argument is, as far as a guess goes: a tensor's dtype and shape, a number's
    type and value, an object's type (and its flavour where it has one)."""
    import torch

    if isinstance(value, torch.Tensor):
        layout = "" if value.layout == torch.strided else f" {value.layout}"
        try:
            bits = value.layout == torch.strided and value.is_floating_point() and bool(
                ((value == 0) | (value == 1)).all())
        except Exception:  # noqa: BLE001 - a meta or quantised tensor: no values to read
            bits = False
        return (f"{str(value.dtype).replace('torch.', '')} {tuple(value.shape)}{layout}"
                + (" of 0/1" if bits and value.numel() >= 2 else ""))
    if value is None or isinstance(value, (bool, int, float, str)):
        return f"{type(value).__name__} {value!r}"
    if type(value).__name__ == "LinearStandIn":
        return "a linear map (x @ M.T on the last dimension, M seeded)"
    text = repr(value)
    return text if " at 0x" not in text and len(text) < 80 else type(value).__name__


def with_second_guesses(found: Any, final: Any, call, plans: list[list[Slot]], won: list[Slot],
                        seed: int, dtype: str, given: set[str]) -> Any:
    """``final`` (``found`` after its last touches) able to list its other candidates, unless
    the touches changed an argument's kind or shape (the layout the code states)."""
    try:
        if [_kind(a) for a in found.args] != [_kind(a) for a in final.args]:
            return final
    except Exception:  # noqa: BLE001 - an argument we cannot describe: no second guesses
        return final
    plans = [list(p) for p in plans]  # the search mutates function slots' flavour in place
    won = [replace(s) for s in won]
    from gradsmith.discovery.caller_guess import project_inputs

    names = [s.name for s in won]
    return replace(final, others=lambda failed: (guessed(won, given), second_guesses(
        call, plans, won, tuple(failed), seed, dtype, set(given)) + project_inputs(
        getattr(call, "__self__", None), seed, tuple(failed), names)))
