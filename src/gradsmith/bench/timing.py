"""Forward+backward timing: interleaved repeated runs with warm-up, median and spread."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch

from gradsmith._errors import GradsmithError

__all__ = ["Stats", "measure", "interleaved", "interleaved_samples", "forward_backward",
           "ratio_spread"]


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
    """One training step of ``fn``: forward, then backward of the sum of its outputs.

    Every output tensor that requires grad (also inside a returned tuple or list) is summed
    into the loss. An output that is not a tensor requiring grad (e.g. ``None`` from a step
    function that runs its own backward) is not differentiated, so ``fn`` alone is what gets
    timed.
    """
    loss = differentiable_loss(fn(*inputs))
    if loss is not None:
        loss.backward()


def join_notes(notes: Sequence[str]) -> str | None:
    """A row's notes as one string, ``"; "`` between them (and only there: a note's own
    ``"; "``, e.g. in an exception message, becomes ``", "``, so reports can split them).

    Example:
        >>> join_notes(["inputs synthesised", "reference: ValueError: a; b"])
        'inputs synthesised; reference: ValueError: a, b'
    """
    return "; ".join(n.replace("; ", ", ") for n in notes) or None


def differentiable_loss(out: Any) -> torch.Tensor | None:
    """The sum of every output tensor that requires grad (``None`` when there is none).

    Example:
        >>> x = torch.ones(2, requires_grad=True)
        >>> differentiable_loss((x * 2, x.detach(), [x * 3]))
        tensor(10., grad_fn=<AddBackward0>)
    """
    if isinstance(out, torch.Tensor):
        return out.sum() if out.requires_grad else None
    if isinstance(out, (tuple, list)):
        parts = [p for p in map(differentiable_loss, out) if p is not None]
        if parts:
            total = parts[0]
            for p in parts[1:]:
                total = total + p
            return total
    return None


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
    samples = interleaved_samples(candidates, repeat, warmup, alternate=alternate, clock=clock)
    return {name: Stats.of(ts) for name, ts in samples.items()}


def interleaved_samples(
        candidates: Mapping[str, tuple[Callable[..., Any], Callable[[], Sequence[Any]]]],
        repeat: int = 10, warmup: int = 2, *, alternate: bool = False,
        clock: Callable[[], float] = time.perf_counter) -> dict[str, list[float]]:
    """Like :func:`interleaved`, but the raw seconds of every timed run, in round order.

    Run ``i`` of every candidate belongs to the same round, so ``a[i] / b[i]`` pairs runs made
    under the same background load (see :func:`ratio_spread`).
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
    return times


def ratio_spread(a: Sequence[float], b: Sequence[float]) -> tuple[float, float, float]:
    """Median and interquartile range (q1, q3) of the per-round ratios ``a[i] / b[i]``.

    Interleaved runs of one round share the machine's load at that moment, so the ratios of
    paired runs spread less than the ratio of two independent medians, and say how far the
    ratio itself can be trusted.

    Example:
        >>> ratio_spread([2.0, 4.0, 3.0], [1.0, 2.0, 2.0])
        (2.0, 1.75, 2.0)
    """
    if len(a) != len(b) or not a:
        raise ValueError(f"need paired, non-empty runs, got {len(a)} and {len(b)}")
    ratios = sorted(x / y for x, y in zip(a, b) if y > 0)
    if not ratios:
        raise ValueError("every reference run took 0 s")
    if len(ratios) >= 2:
        q1, _, q3 = statistics.quantiles(ratios, n=4, method="inclusive")
    else:
        q1 = q3 = ratios[0]
    return statistics.median(ratios), q1, q3


def measure(fn: Callable[..., Any], make_inputs: Callable[[], Sequence[Any]], repeat: int = 10,
            warmup: int = 2, *, clock: Callable[[], float] = time.perf_counter) -> Stats:
    """Forward+backward time of one function (see :func:`interleaved`).

    Example:
        >>> measure(torch.relu, lambda: (torch.randn(8, requires_grad=True),), repeat=2).runs
        2
    """
    return interleaved({"fn": (fn, make_inputs)}, repeat, warmup, clock=clock)["fn"]
