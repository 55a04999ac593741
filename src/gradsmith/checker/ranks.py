"""A Function checked in the single-process group gradsmith started for it is not a plain PASS.

Synthesis starts a world-size-1 group when forward calls ``torch.distributed`` with none
started (:mod:`gradsmith.discovery.process_group`). There a gather or a reduce is the identity:
a backward wrong on every rank still FAILs, but one that drops or double-counts the gradients
other ranks send (an all-gather keeping only its own slice) cannot show it. So a Function whose
module uses ``torch.distributed``, checked in such a group, gets an incomplete finding: the
verdict is INCOMPLETE unless an error was found.

With no group at all (forward takes an ``if not dist.is_initialized()`` branch, so synthesis
never asked for one) the collective branch never ran: a Function whose own code calls a
collective (:mod:`gradsmith.discovery.collectives`) gets the same incomplete finding, naming
the collectives not exercised (corpus 12d held-out: an all-gather PASSed on its identity
branch).
"""

from __future__ import annotations

from typing import Any

from gradsmith.checker.report import Finding
from gradsmith.discovery.collectives import called
from gradsmith.discovery.process_group import inherited, started, uses_distributed


def single_group_findings(target: Any) -> list[Finding]:
    """The incomplete finding for ``target`` (the Function checked), or none."""
    if not uses_distributed(target):
        return []
    if started():
        why = ("it ran in a process group of one that gradsmith started (gloo, world size 1): "
               "a gather or reduce is the identity there, so what backward does with the "
               "gradients other ranks send is not checked")
        return [_finding(why, 1)]
    if inherited():
        why = ("it ran in a process group of one that the environment started before gradsmith "
               "ran (world size 1; renewed in gradsmith's task process): a gather or reduce is "
               "the identity there, so what backward does with the gradients other ranks send "
               "is not checked")
        return [_finding(why, 1)]
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return []  # the user's own group: its collectives ran
    names = called(target)
    if not names:
        return []
    why = (f"its code calls {', '.join(names)} on torch.distributed, but no process group "
           "existed, so the branch that communicates never ran: only the single-process path "
           "was checked")
    return [_finding(why, None)]  # no group: no world size


def _finding(why: str, world_size: int | None) -> Finding:
    return Finding(
        "check-incomplete", "warning",
        f"the multi-rank check could not be run: {why}; without an error the verdict is "
        "INCOMPLETE, not PASS",
        "check it with 2+ processes (torch.multiprocessing.spawn with a gloo group, each rank "
        "back-propagating its own loss), comparing every rank's gradient with autograd of the "
        "sum of all ranks' losses", "setup",
        details={"reason": why, "incomplete": True, "world_size": world_size})
