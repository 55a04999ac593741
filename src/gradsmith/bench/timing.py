"""Forward+backward timing: interleaved repeated runs with warm-up, median and spread."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch

__all__ = ["Stats", "measure", "interleaved", "forward_backward"]


@dataclass(frozen=True)
class Stats:
    """Summary of repeated timings, in milliseconds."""

    median: float
    q1: float
    q3: float
    min: float
    max: float
    runs: int

    @classmethod
    def of(cls, seconds: Sequence[float]) -> Stats:
        ms = sorted(s * 1e3 for s in seconds)
        if len(ms) >= 2:
            q1, _, q3 = statistics.quantiles(ms, n=4, method="inclusive")
        else:
            q1 = q3 = ms[0]
        return cls(statistics.median(ms), q1, q3, ms[0], ms[-1], len(ms))

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def forward_backward(fn: Callable[..., Any], inputs: Sequence[Any]) -> None:
    """One training step of ``fn``: forward, then backward of the sum of its output."""
    out = fn(*inputs)
    if isinstance(out, torch.Tensor) and out.requires_grad:
        out.sum().backward()


def interleaved(candidates: Mapping[str, tuple[Callable[..., Any], Callable[[], Sequence[Any]]]],
                repeat: int = 10, warmup: int = 2) -> dict[str, Stats]:
    """Time several ``(fn, make_inputs)`` candidates in round-robin order.

    Interleaving spreads background load (other processes, frequency scaling) over all
    candidates instead of biasing whichever ran during a noisy moment. Inputs are built fresh
    before each run, outside the timed region.

    Args:
        candidates: name -> ``(fn, make_inputs)``.
        repeat: timed runs per candidate.
        warmup: untimed runs per candidate first (allocator, lazy init, native builds).

    Returns:
        name -> :class:`Stats` of forward+backward time.

    Example:
        >>> stats = interleaved({"relu": (torch.relu, lambda: (torch.randn(8, requires_grad=True),))},
        ...                     repeat=3, warmup=1)
        >>> stats["relu"].runs
        3
    """
    if repeat < 1:
        raise ValueError(f"repeat must be >= 1, got {repeat}")
    times: dict[str, list[float]] = {name: [] for name in candidates}
    for i in range(warmup + repeat):
        for name, (fn, make_inputs) in candidates.items():
            inputs = make_inputs()
            start = time.perf_counter()
            forward_backward(fn, inputs)
            elapsed = time.perf_counter() - start
            if i >= warmup:
                times[name].append(elapsed)
    return {name: Stats.of(ts) for name, ts in times.items()}


def measure(fn: Callable[..., Any], make_inputs: Callable[[], Sequence[Any]], repeat: int = 10,
            warmup: int = 2) -> Stats:
    """Forward+backward time of one function (see :func:`interleaved`).

    Example:
        >>> measure(torch.relu, lambda: (torch.randn(8, requires_grad=True),), repeat=2).runs
        2
    """
    return interleaved({"fn": (fn, make_inputs)}, repeat, warmup)["fn"]
