"""Which Triton kernels multiply float32 operands in TF32 on a GPU (read from their code).

On NVIDIA GPUs since Ampere, ``tl.dot`` of float32 operands rounds them to TF32 (10 explicit
mantissa bits, unit roundoff 2**-11) unless asked for IEEE float32: ``input_precision="ieee"``
(``"tf32x3"`` is float32-accurate too), ``allow_tf32=False`` in older Triton, or
``TRITON_F32_DEFAULT=ieee`` in the environment for calls that say nothing. A correct kernel's
float32 gradient then differs from float64's by about 1e-3 relative. A precision or flag that is
not a constant in the code (``allow_tf32=tf32`` from a heuristic) is taken as TF32: it is on by
default on the GPUs that have it. ``@triton.jit`` functions a kernel calls are read too.
"""

from __future__ import annotations

import ast
import functools
import inspect
import os
import textwrap
from typing import Any

__all__ = ["tf32_dots"]

#: Precisions of ``tl.dot`` that keep float32 accuracy.
_EXACT = ("ieee", "tf32x3")


def tf32_dots(kernel: Any) -> bool:
    """Whether ``kernel`` (a ``JITFunction``, an autotuned or heuristic kernel, or a Python
    function) or a ``@triton.jit`` function it calls has a ``tl.dot`` that runs in TF32 on a
    GPU for float32 operands. False where its source cannot be read.

    Example:
        >>> def k(a, b):
        ...     return tl.dot(a, b, input_precision="ieee")
        >>> tf32_dots(k)
        False
    """
    fn = _python_function(kernel)
    if fn is None:
        return False
    return _reads_cached(fn, os.environ.get("TRITON_F32_DEFAULT", "").strip().lower() in _EXACT)


@functools.lru_cache(maxsize=512)
def _reads_cached(fn: Any, default_ieee: bool) -> bool:
    # once per kernel: every native launch asks
    try:
        return _reads_tf32(fn, frozenset(), default_ieee)
    except Exception:  # noqa: BLE001 - unreadable source: nothing shown
        return False


def _python_function(kernel: Any) -> Any:
    for _ in range(8):  # Autotuner -> Heuristics -> JITFunction -> function
        if inspect.isfunction(kernel):
            return kernel
        kernel = getattr(kernel, "fn", None)
    return None


def _reads_tf32(fn: Any, seen: frozenset, default_ieee: bool) -> bool:
    seen = seen | {fn}
    called = []
    for node in ast.walk(ast.parse(textwrap.dedent(inspect.getsource(fn)))):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else \
            node.func.id if isinstance(node.func, ast.Name) else None
        if name == "dot" and _tf32_call(node, default_ieee):
            return True
        if isinstance(node.func, ast.Name):
            called.append(node.func.id)
    for name in called:  # @triton.jit helpers (objects with .fn), not plain functions
        target = getattr(fn, "__globals__", {}).get(name)
        inner = _python_function(target) if hasattr(target, "fn") else None
        if inner is not None and inner not in seen and _reads_tf32(inner, seen, default_ieee):
            return True
    return False


def _tf32_call(call: ast.Call, default_ieee: bool) -> bool:
    """A ``dot(a, b, acc, input_precision, allow_tf32, ...)`` call that runs in TF32."""
    given = {k.arg: k.value for k in call.keywords if k.arg}
    precision = given.get("input_precision", call.args[3] if len(call.args) > 3 else None)
    allow = given.get("allow_tf32", call.args[4] if len(call.args) > 4 else None)
    precision, allow = (None if isinstance(v, ast.Constant) and v.value is None else v
                        for v in (precision, allow))
    if precision is not None:
        return not (isinstance(precision, ast.Constant) and str(precision.value).lower() in _EXACT)
    if allow is not None:
        return not (isinstance(allow, ast.Constant) and allow.value is False)
    return not default_ieee
