"""Forward+backward timing: interleaved repeated runs with warm-up, median and spread."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch

from gradsmith._errors import GradsmithError

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

    def to_dict(self, unit: str = "ms") -> dict[str, float]:
        """The fields as a dict, times in ``unit`` (``"ms"`` or ``"s"``).

        Example:
            >>> Stats.of([0.002, 0.004]).to_dict("s")["median"]
            0.003
        """
        if unit not in _PER_MS:
            raise GradsmithError(f"unit must be one of {sorted(_PER_MS)}, got {unit!r}; "
                                 "pass 'ms' (the default) or 's'")
        scale = _PER_MS[unit]
        return {k: v if k == "runs" else v * scale for k, v in asdict(self).items()}


_PER_MS = {"ms": 1.0, "s": 1e-3}


def forward_backward(fn: Callable[..., Any], inputs: Sequence[Any]) -> None:
    """One training step of ``fn``: forward, then backward of the sum of its output.

    An output that is not a tensor requiring grad (e.g. ``None`` from a step function that runs
    its own backward) is not differentiated, so ``fn`` alone is what gets timed.
    """
    out = fn(*inputs)
    if isinstance(out, torch.Tensor) and out.requires_grad:
        out.sum().backward()


def interleaved(candidates: Mapping[str, tuple[Callable[..., Any], Callable[[], Sequence[Any]]]],
                repeat: int = 10, warmup: int = 2, *, alternate: bool = False,
                clock: Callable[[], float] = time.perf_counter) -> dict[str, Stats]:
    """Time several ``(fn, make_inputs)`` candidates in round-robin order.

    Interleaving spreads background load (other processes, frequency scaling) over all
    candidates instead of biasing whichever ran during a noisy moment. Inputs are built fresh
    before each run, outside the timed region (``make_inputs`` may also reset state, such as
    ``.grad`` of shared leaves, and return them).

    Args:
        candidates: name -> ``(fn, make_inputs)``.
        repeat: timed runs per candidate.
        warmup: untimed runs per candidate first (allocator, lazy init, native builds).
        alternate: reverse the candidate order on every other round, so that no candidate
            always runs right after the same neighbour (caches, allocator state).
        clock: seconds counter read before and after each run; ``time.thread_time`` counts
            only this thread's CPU time, which a busy machine disturbs less (meaningful with
            ``torch.set_num_threads(1)``, when all work runs on the calling thread).

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
    names = list(candidates)
    for i in range(warmup + repeat):
        for name in names[::-1] if alternate and i % 2 else names:
            fn, make_inputs = candidates[name]
            inputs = make_inputs()
            start = clock()
            forward_backward(fn, inputs)
            elapsed = clock() - start
            if i >= warmup:
                times[name].append(elapsed)
    return {name: Stats.of(ts) for name, ts in times.items()}


def measure(fn: Callable[..., Any], make_inputs: Callable[[], Sequence[Any]], repeat: int = 10,
            warmup: int = 2, *, clock: Callable[[], float] = time.perf_counter) -> Stats:
    """Forward+backward time of one function (see :func:`interleaved`).

    Example:
        >>> measure(torch.relu, lambda: (torch.randn(8, requires_grad=True),), repeat=2).runs
        2
    """
    return interleaved({"fn": (fn, make_inputs)}, repeat, warmup, clock=clock)["fn"]
