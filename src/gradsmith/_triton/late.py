"""Kernels imported before gradsmith could switch the interpreter on: the direct API (private).

``gradsmith check`` calls :func:`gradsmith._triton.prepare` before user code loads.
``gradsmith.check(Fn, ...)`` is called from user code that has already imported its kernels:
``@triton.jit`` then made compiled-mode ``JITFunction`` objects, and on a machine without a
GPU every launch fails with "0 active drivers". :func:`adopt` closes that gap when it
applies (triton imported, no CUDA device visible, ``TRITON_INTERPRET`` not chosen by the
user): it switches the interpreter on for kernels defined later, applies the shims, and runs
launches of the kernels already made through Triton's own ``InterpretedFunction`` of the same
Python function (``@triton.autotune`` and ``@triton.heuristics`` launch through them too).
When it cannot (Triton < 3.0), :data:`ADVICE` is what to do, and the check says it.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["ADVICE", "adopt"]

ADVICE = ("its Triton kernels were compiled for a GPU (imported before the interpreter was "
          "on) and no GPU is visible: run `gradsmith check FILE` (it sets the interpreter up "
          "before your module loads), or call `gradsmith._triton.prepare()` (or set "
          "TRITON_INTERPRET=1) before importing the module that defines the kernels")

_MARK = "__gradsmith_late__"


def adopt() -> bool:
    """Run already-imported Triton kernels in the interpreter when they cannot run natively.

    Returns:
        True when kernels launched from now on run interpreted (already so, or adopted now).
    """
    from gradsmith._triton import interpreting, prepare

    if "triton" not in sys.modules:  # no kernels defined yet: nothing to adopt
        return interpreting()
    if not prepare():  # a GPU, TRITON_INTERPRET=0 or no numpy: kernels run as Triton runs them
        return False
    return _route_jit()


def _route_jit() -> bool:
    """``JITFunction.run`` made before the variable was set runs interpreted; False when the
    installed Triton has no such hook (then :data:`ADVICE` applies)."""
    try:
        from triton.runtime import interpreter
        from triton.runtime.jit import JITFunction
    except ImportError:
        return False
    original = getattr(JITFunction, "run", None)
    if original is None or not hasattr(interpreter, "InterpretedFunction"):
        return False
    if getattr(original, _MARK, False):
        return True
    made: dict[int, Any] = {}

    def run(self: Any, *args: Any, grid: Any, warmup: bool = False, **kwargs: Any) -> Any:
        fn = made.get(id(self))
        if fn is None:
            fn = made[id(self)] = interpreter.InterpretedFunction(self.fn)
            made[id(self), "keep"] = self  # id(self) stays unique while we hold it
        return fn.run(*args, grid=grid, warmup=warmup, **kwargs)

    setattr(run, _MARK, True)
    JITFunction.run = run
    return True
