"""A single-process group for a Function whose forward calls ``torch.distributed`` when none was
started (issue 18: an all-gather was a skip, "Default process group has not been initialized").

With zero configuration gradsmith cannot launch the ranks a collective is written for. What it
can do is run the Function in a group of one (gloo, an in-memory store, rank 0 of 1): there a
gather or a reduce is the identity, so backward is checked on the degenerate case only. The row
says so (:data:`ASSUMED` in its Inputs column) and is never a plain PASS
(:mod:`gradsmith.checker.ranks`): what backward does with other ranks' gradients is not checked.
"""

from __future__ import annotations

from typing import Any

ASSUMED = ("no torch.distributed process group was started, so gradsmith started one of its own "
           "with one process (gloo, rank 0, world size 1)")

_started = False


def needs_group(reason: str) -> bool:
    """Whether a failed synthesis ``reason`` is torch.distributed asking for a process group."""
    return "process group has not been initialized" in reason


def start_single_group() -> bool:
    """Start a world-size-1 gloo group in this (the task's) process; False when torch has no
    distributed support or a group already exists (the user's own: never replaced)."""
    global _started
    import torch.distributed as dist

    if not dist.is_available() or dist.is_initialized():
        return False
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    _started = True
    return True


def started() -> bool:
    """Whether gradsmith started the current process group (:func:`start_single_group`)."""
    return _started


def uses_distributed(fn: Any) -> bool:
    """Whether the module that defines ``fn`` holds ``torch.distributed`` or one of its
    functions (``import torch.distributed as dist``, ``from torch.distributed import ...``)."""
    import inspect
    import types

    module = inspect.getmodule(fn)
    for value in vars(module).values() if module is not None else ():
        name = value.__name__ if isinstance(value, types.ModuleType) else \
            getattr(value, "__module__", None)
        if isinstance(name, str) and (name == "torch.distributed"
                                      or name.startswith("torch.distributed.")):
            return True
    return False
