"""``checkpoint``: the Function inside ``torch.utils.checkpoint`` (non-reentrant) gives the same
gradients as outside it.

Under activation checkpointing the forward runs twice: once for the outputs, and again during
backward to recompute what it saved. The gradients are right only if the recomputation saves
exactly what the first run saved. It does not when forward reads state that it also changes
(an in-place update of a buffer or of an input it then uses), or when it draws random numbers
that checkpoint cannot replay. A random forward is also checked with
``preserve_rng_state=False`` (a documented speed option): if its gradients change there, the
Function needs the default ``True``, which is worth knowing (info).
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.checkpoint import checkpoint

from gradsmith.checker.deploy._common import (
    describe,
    evaluate,
    first_line,
    is_random,
    mismatches,
    reference,
)
from gradsmith.checker.report import Finding
from gradsmith.checker.session import Session

NAME = "checkpoint"


def checkpointed(call: Any, preserve_rng_state: bool = True) -> Any:
    """``call`` wrapped in a non-reentrant checkpoint."""
    def run(*args: Any) -> Any:
        return checkpoint(call, *args, use_reentrant=False,
                          preserve_rng_state=preserve_rng_state)
    return run


def run(session: Session) -> list[Finding]:
    want = reference(session)
    tol = torch.finfo(want.outs[0].dtype).eps ** 0.5 if want.outs else 1e-8
    call = session.subject.target.call
    try:
        got = evaluate(session, checkpointed(call))
    except Exception as exc:  # noqa: BLE001
        return [Finding(
            "checkpoint-error", "warning",
            f"inside torch.utils.checkpoint(use_reentrant=False) the Function raised "
            f"{first_line(exc)}",
            "the recomputation in backward must save tensors of the same shapes and dtypes "
            "as the first forward: forward must not depend on state it changes", NAME,
            details={"exception": type(exc).__name__})]
    bad = mismatches(session, got, want, tol)
    if bad:
        random = is_random(session)
        cause = ("it draws random numbers that checkpoint does not replay (a private "
                 "torch.Generator, numpy or Python random)" if random else
                 "it reads state that it also changes (an in-place update of a buffer or "
                 "of an input, a counter), so the recomputation saves other values")
        return [Finding(
            "checkpoint-mismatch", "error",
            f"under activation checkpointing the gradients differ from plain autograd: "
            f"{describe(bad)}; backward recomputes forward, and {cause}",
            "make forward a pure function of its inputs and the torch RNG: return updated "
            "state as an output (or update it outside the checkpointed region) and draw "
            "random numbers from the default generator", NAME, bad[0][1],
            details={"mismatches": [list(b) for b in bad], "random": random})]
    if not is_random(session):
        return []
    try:
        loose = evaluate(session, checkpointed(call, preserve_rng_state=False))
    except Exception:  # noqa: BLE001 - the preserved run worked; this is informative only
        return []
    differs = mismatches(session, loose, want, tol)
    if not differs:
        return []
    return [Finding(
        "checkpoint-needs-rng-state", "info",
        "forward draws random numbers: under checkpointing its gradients are right with "
        "preserve_rng_state=True (the default) and wrong with preserve_rng_state=False "
        f"({describe(differs)}): the recomputation draws a new mask",
        "keep preserve_rng_state=True when checkpointing a region that contains it",
        NAME, details={"mismatches": [list(b) for b in differs]})]
