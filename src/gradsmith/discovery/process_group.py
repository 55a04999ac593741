"""A single-process group for a Function whose forward or backward calls ``torch.distributed``
when none was started (issue 18: an all-gather was a skip, "Default process group has not been
initialized"; corpus 11c dev: a backward all-reduce was a ``backward-error``, the check's
environment blamed on the Function).

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
_inherited = False


def needs_group(reason: str) -> bool:
    """Whether a failed synthesis ``reason`` is torch.distributed asking for a process group."""
    return "process group has not been initialized" in reason


def backward_needs_group(fn: Any, found: Any) -> bool:
    """Whether backward, run on the inputs ``found`` synthesised (forward ran on them), asks
    for a process group that does not exist. Only a Function whose module uses
    ``torch.distributed`` pays for the extra forward and backward this takes."""
    import torch.distributed as dist

    args = getattr(found, "args", None)
    if args is None or not dist.is_available() or dist.is_initialized() \
            or not uses_distributed(fn):
        return False
    from gradsmith.discovery.probe import backward_error
    from gradsmith.discovery.slots import signature

    raised = backward_error(signature(fn)[0], tuple(args))
    return raised is not None and needs_group(raised)


def start_single_group() -> bool:
    """Start a world-size-1 gloo group in this (the task's) process; False when torch has no
    distributed support or a group already exists (the user's own: never replaced)."""
    global _started, _inherited
    import torch.distributed as dist

    if not dist.is_available() or dist.is_initialized():
        return False
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    _started, _inherited = True, False
    return True


def renew_inherited() -> bool:
    """Replace a world-size-1 group this process inherited through ``fork`` with an equal one
    of its own; True when it did (then :func:`started` is True).

    Each task runs in a fresh fork, and a group made before it (an environment whose
    ``sitecustomize`` starts a gloo group of one, corpus 14d dev: soft-moe-pytorch's
    ``AllGatherFunction``) left its communication threads in the parent: the first collective
    in the fork waits forever (a 30 s timeout), and so does ``destroy_process_group``. The old
    group is dropped from torch's registries without being touched (kept referenced, never
    destroyed: the task ends with ``os._exit``) and a fresh group of one takes its place, the
    same degenerate case the environment gave. A larger world cannot be rebuilt from one rank
    and is left as it is. Costs nothing where ``torch.distributed`` was never imported. The
    group stays the environment's (:func:`inherited`), not one gradsmith started."""
    global _inherited
    import sys

    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized() \
            or dist.get_world_size() != 1:
        return False
    import torch
    from torch.distributed import distributed_c10d as c10d

    world = c10d._world
    _abandoned.append((world.default_pg, dict(world.pg_map)))
    for table in (world.pg_map, world.pg_names, world.pg_group_ranks, world.pg_backend_config,
                  world.tags_to_pg, world.pg_to_tag):
        table.clear()
    torch._C._distributed_c10d._unregister_all_process_groups()
    world.default_pg = None
    world.group_count = 0
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    _inherited = True
    return True


def inherited() -> bool:
    """Whether the current group of one is the environment's, renewed in this task process
    (:func:`renew_inherited`): the user's setup chose a world of one, gradsmith did not."""
    return _inherited


# Inherited groups dropped by renew_inherited: referenced so their destructors never run.
_abandoned: list = []


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
