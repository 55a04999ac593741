"""Memory kept for backward and peak memory of one forward+backward step.

:func:`saved_bytes` counts what autograd keeps alive between forward and backward: every tensor
saved through ``save_for_backward`` (seen by ``torch.autograd.graph.saved_tensors_hooks``) and
every tensor a custom Function stored as an attribute of ``ctx`` (``ctx.y = y``, also inside
tuples, lists, dicts and sets), found by walking the autograd graph of the outputs. Each storage
counts once, whichever way it was kept. :func:`peak_bytes` measures the highest memory allocated
during a forward+backward step above what was allocated before it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import torch

__all__ = ["saved_bytes", "ctx_tensors", "peak_bytes"]

_MAX_DEPTH = 6  # nested containers on ctx deeper than this are not searched


def _storage_key(t: torch.Tensor) -> tuple[Any, int] | None:
    try:
        storage = t.untyped_storage()
    except (RuntimeError, NotImplementedError):  # tensors without storage (e.g. sparse, fake)
        return None
    return (t.device, storage.data_ptr()), storage.nbytes()


def _tensors_in(value: Any, depth: int = 0) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif depth < _MAX_DEPTH and isinstance(value, (tuple, list, set, frozenset)):
        for item in value:
            yield from _tensors_in(item, depth + 1)
    elif depth < _MAX_DEPTH and isinstance(value, dict):
        for key, item in value.items():
            yield from _tensors_in(key, depth + 1)
            yield from _tensors_in(item, depth + 1)


def ctx_tensors(outputs: Any) -> list[torch.Tensor]:
    """Tensors stored as attributes of custom Functions' ``ctx`` in the graph of ``outputs``.

    ``ctx`` of a custom Function is its graph node, so every node reachable from the outputs'
    ``grad_fn`` is searched: its attributes, and tuples, lists, dicts and sets in them (up to
    a few levels deep). Tensors passed to ``save_for_backward`` are not attributes and are not
    returned here (``saved_tensors_hooks`` sees those).

    Args:
        outputs: a tensor, or a (nested) tuple/list/dict of them, as returned by the forward.

    Returns:
        The tensors found, in graph order (possibly sharing storage; deduplicate by storage).

    Example:
        >>> class Stash(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x):
        ...         ctx.y = x.exp()  # the anti-pattern: kept alive, but invisible to hooks
        ...         return ctx.y
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         return g * ctx.y
        >>> [t.shape for t in ctx_tensors(Stash.apply(torch.ones(3, requires_grad=True)))]
        [torch.Size([3])]
    """
    from torch.autograd.function import BackwardCFunction

    found: list[torch.Tensor] = []
    stack = [t.grad_fn for t in _tensors_in(outputs) if t.grad_fn is not None]
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, BackwardCFunction):
            for value in vars(node).values():
                found.extend(_tensors_in(value))
        stack.extend(fn for fn, _ in getattr(node, "next_functions", ()))
    return found


def saved_bytes(fn: Callable[..., Any], inputs: Sequence[Any],
                exclude: Iterable[torch.Tensor] = ()) -> int:
    """Bytes of every distinct storage that autograd keeps for backward while running ``fn``.

    Counted: every tensor saved for backward (``save_for_backward`` or a builtin op's own saved
    tensors) and every tensor stored on a custom Function's ``ctx`` (see :func:`ctx_tensors`),
    each by its whole underlying storage, once: two views of one buffer, the same tensor saved
    twice, or saved and also stashed on ``ctx``, count once. A saved input counts too (it stays
    alive until backward) unless its storage is excluded. Nothing is run backward.

    Args:
        fn: the forward to measure.
        inputs: its positional arguments (tensors that require grad, numbers, ...).
        exclude: tensors whose storages are not counted even when saved, e.g. a network's
            input and parameters, which live anyway (the activation cost alone).

    Returns:
        Total bytes held for backward.

    Example:
        >>> x = torch.randn(3, 4, requires_grad=True)
        >>> y = torch.randn(3, 4, requires_grad=True)
        >>> saved_bytes(torch.mul, (x, y))  # x * y saves both factors
        96
        >>> saved_bytes(torch.mul, (x, y), exclude=[y])
        48
    """
    skip = {key[0] for key in map(_storage_key, exclude) if key is not None}
    seen: dict[tuple[Any, int], int] = {}

    def count(t: torch.Tensor) -> None:
        key = _storage_key(t)
        if key is not None and key[0] not in skip:
            seen[key[0]] = key[1]

    def pack(t: torch.Tensor) -> torch.Tensor:
        count(t)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        outputs = fn(*inputs)
    for t in ctx_tensors(outputs):
        count(t)
    return sum(seen.values())


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Silence fd 2 (the profiler's native start/stop lines) for the duration."""
    try:
        saved = os.dup(2)
    except OSError:
        yield
        return
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def peak_bytes(step: Callable[[], Any], device: str | torch.device = "cpu") -> int:
    """Highest memory allocated while ``step()`` runs, above what was allocated before it.

    On CUDA this is ``torch.cuda.max_memory_allocated`` after resetting the peak; on the CPU,
    where PyTorch keeps no allocator statistics, the allocation and free events recorded by
    ``torch.profiler`` (``profile_memory=True``) are replayed in time order. Either way it covers
    the forward, the backward and the gradients written, but not memory allocated outside
    PyTorch's allocators (NumPy, a native library's own ``malloc``).

    Args:
        step: the work to measure, e.g. ``lambda: forward_backward(fn, inputs)``.
        device: where the tensors live (``"cpu"`` or a CUDA device).

    Returns:
        Peak bytes above the starting point (0 if nothing was allocated).

    Example:
        >>> x = torch.randn(1024, requires_grad=True)
        >>> peak_bytes(lambda: (x * 2).sum().backward()) >= 1024 * 4  # x * 2, then x.grad
        True
    """
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        start = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        step()
        torch.cuda.synchronize(device)
        return max(0, torch.cuda.max_memory_allocated(device) - start)
    from torch.profiler import ProfilerActivity, profile

    with _quiet_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    cpu = torch._C._autograd.DeviceType.CPU
    events = sorted((e for e in prof.profiler.kineto_results.events()
                     if e.name() == "[memory]" and e.device_type() == cpu),
                    key=lambda e: e.start_ns())
    current = peak = 0
    for event in events:
        current += event.nbytes()
        peak = max(peak, current)
    return peak
