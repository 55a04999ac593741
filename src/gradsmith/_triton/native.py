"""Triton kernel launches compiled for a GPU (no interpreter), counted.

The interpreter's launches are counted by a shim (:mod:`gradsmith._triton.shims`); native
launches go through ``JITFunction.run`` (``@triton.autotune`` and ``@triton.heuristics`` end
there too), which this wraps once per process. gradsmith needs the count for one thing: a
backward that launches kernels and is not ``@once_differentiable`` gets one
``double-backward-unsupported`` warning naming the launches as the cause, from a cheap
directional comparison (:func:`gradsmith.checker.kernels.kernel_double_backward`), instead of a
full element-by-element second-order comparison whose findings all share that cause. Importing triton does not initialise CUDA, so this is safe in the worker
server before it forks.

Launches of kernels whose ``tl.dot`` rounds float32 operands to TF32 on a GPU are counted apart
(:data:`TF32`, names in :data:`TF32_KERNELS`): the check's float32 calibration accounts for it
(:mod:`gradsmith.checker.tf32`). See :func:`gradsmith._triton.dots.tf32_dots` for the rule.
"""

from __future__ import annotations

from typing import Any

#: Native Triton kernel launches in this process so far.
LAUNCHES = [0]
#: Native launches of kernels with a TF32 ``tl.dot``; each such kernel's name -> the value of
#: :data:`TF32` at its last launch.
TF32 = [0]
TF32_KERNELS: dict[str, int] = {}
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
        note_tf32(self)
        return original(self, *args, **kwargs)

    setattr(run, _MARK, True)
    JITFunction.run = run
    return "applied"


def note_tf32(kernel: Any) -> None:
    """Count a launch of ``kernel`` in :data:`TF32` when its code has a TF32 ``tl.dot``."""
    from gradsmith._triton.dots import tf32_dots

    if tf32_dots(kernel):
        TF32[0] += 1
        TF32_KERNELS[getattr(kernel, "__name__", None) or repr(kernel)] = TF32[0]
