"""A declaration compared with backward beyond the check's own inputs.

A surrogate fitted on one input set can agree with backward by luck: ``x.clamp(-1, 1)`` and
a window ``[-0.86, 1.10]`` agree on every element of a ``randn`` input that no element
falls between -1 and -0.86 or between 1 and 1.10; a learned step of 0.1 with bounds
``[-4, 3]`` leaves most ``randn`` elements outside the window, so the rule for the elements
inside is never compared, and a backward whose window is off by half a step agrees with the
right declaration on almost every draw. Here each element-wise input (one value per output
element) is filled with values spread over a grid (steps of 0.01 near 0, 0.05 up to 4,
2 up to 40, and far values, off the round numbers), chunk by chunk, every other argument
as in the check, and backward's gradients of all inputs are compared with the declaration's
at each chunk, where both are finite.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch

from gradsmith.checker import declared, rng
from gradsmith.checker.problem import Problem
from gradsmith.checker.session import Session


def _grid(end: float, count: int) -> torch.Tensor:
    """``count`` values from ``-end`` to ``end``, shifted off the round numbers (0, 1, 0.5)
    where thresholds and kinks sit: at a tie ``>`` and ``>=`` differ, and no rule is wrong."""
    step = 2 * end / (count - 1)
    return torch.linspace(-end, end, count, dtype=torch.float64) + 0.2731 * step


GRID = torch.cat([_grid(4, 161), _grid(0.2, 41), _grid(40, 41),
                  torch.tensor([-1e3, -100, 100, 1e3], dtype=torch.float64) + 0.2731])


@dataclass
class Disagreement:
    """Where backward and the declaration differ: input ``t`` of the moved inputs ``xs``,
    backward's gradient ``got``, the declaration's ``want``."""

    t: int
    xs: list[torch.Tensor]
    got: torch.Tensor
    want: torch.Tensor
    spread: int  # which input was spread over the grid


def elementwise(problem: Problem) -> list[int]:
    """The inputs with one value per element of an output (real, floating, several)."""
    problem.linearize()
    sizes = {s.numel() for s in problem.out_shapes}
    return [t for t, x in enumerate(problem.xs)
            if x.numel() > 1 and x.numel() in sizes and t not in problem.complex_inputs
            and x.is_floating_point()]


def disagreement(session: Session, kind: str, fn: Any,
                 inputs: Iterable[int] | None = None) -> Disagreement | None:
    """The first grid chunk at which declaration ``fn`` (``kind``: surrogate or intended) and
    backward give different gradients of ``inputs`` (default: all), or None. Chunks at which
    forward, backward or the declaration raises are outside a domain and skipped."""
    problem = session.problem
    chosen = list(range(len(problem.xs))) if inputs is None else list(inputs)
    gen = rng.generator(23)
    for t in elementwise(problem):
        x = problem.xs[t]
        n = x.numel()
        for chunk in GRID.to(x.dtype).split(n):
            flat = x.detach().reshape(-1).clone()
            flat[:len(chunk)] = chunk
            moved = list(problem.xs)
            moved[t] = flat.reshape(x.shape)
            other = Problem(problem.f, moved, problem.labels, accumulate=problem.accumulate,
                            backward_seed=problem.backward_seed)
            try:
                other.linearize()
                v = torch.randn(other.m, generator=gen, dtype=torch.float64).to(x.dtype)
                got = other.vjp(v)
            except Exception:  # noqa: BLE001 - user code outside its domain: not compared
                continue
            want = _declared(session, kind, fn, moved, other.split(v))
            if want is None:  # the declaration's own domain ends first: not compared
                continue
            for k in chosen:
                if not _agree(got[k], want[k], session):
                    return Disagreement(k, moved, got[k], want[k], t)
    return None


def holds(session: Session, kind: str, fn: Any, inputs: Iterable[int] | None = None) -> bool:
    """Whether the declaration gives backward's gradients on the whole grid."""
    return disagreement(session, kind, fn, inputs) is None


def bad(got: torch.Tensor, want: torch.Tensor, session: Session) -> torch.Tensor:
    """The elements outside the check's tolerances where both are finite (far out, a
    formula overflows, ``log(cosh(1000))``: that says nothing about the rule)."""
    s = session.settings
    finite = torch.isfinite(got) & torch.isfinite(want)
    close = (got - want).abs() <= s.atol + s.rtol * want.abs()
    return finite & ~close


def _declared(session, kind, fn, xs, split) -> list[torch.Tensor] | None:
    saved = session.surrogate, session.intended
    session.surrogate, session.intended = (fn, None) if kind == "surrogate" else (None, fn)
    try:
        return declared.reference(session)(xs, split)
    except declared.DeclarationError:
        return None
    finally:
        session.surrogate, session.intended = saved


def _agree(got: torch.Tensor, want: torch.Tensor, session: Session) -> bool:
    return got.shape == want.shape and not bool(bad(got, want, session).any())


# Shared with :mod:`gradsmith.checker.redrawn` (the same comparison at redrawn arguments).
declared_gradients, agree = _declared, _agree
