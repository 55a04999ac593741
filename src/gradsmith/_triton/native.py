"""Triton kernel launches compiled for a GPU (no interpreter), counted.

The interpreter's launches are counted by a shim (:mod:`gradsmith._triton.shims`); native
launches go through ``JITFunction.run`` (``@triton.autotune`` and ``@triton.heuristics`` end
there too), which this wraps once per process. gradsmith needs the count for one thing: a
backward that launches kernels and is not ``@once_differentiable`` gets one clear finding
instead of a double-backward mismatch per input (seen on an H200: Liger-Kernel's rows listed
one per input). Importing triton does not initialise CUDA, so this is safe in the worker
server before it forks.
"""

from __future__ import annotations

from typing import Any

#: Native Triton kernel launches in this process so far.
LAUNCHES = [0]
_MARK = "__gradsmith_counts_launches__"


def count() -> str:
    """Wrap ``JITFunction.run`` to count launches; idempotent. Returns what was done."""
    try:
        from triton.runtime.jit import JITFunction
    except ImportError as exc:
        return f"skipped: {exc}"
    original = JITFunction.run
    if getattr(original, _MARK, False):
        return "applied"

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        LAUNCHES[0] += 1
        return original(self, *args, **kwargs)

    setattr(run, _MARK, True)
    JITFunction.run = run
    return "applied"
