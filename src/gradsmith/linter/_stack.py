"""Run the analysis with room for deep syntax trees.

Valid Python can nest far deeper than the interpreter's default recursion limit allows a
recursive reader of its tree: CPython compiles a chain of 1,200 method calls
(``x.t().t()...``) or a sum of 2,500 terms, and every rule that evaluates an expression
recursively would stop with ``RecursionError`` (an internal error, GS003). The analysis
therefore runs in a worker thread with a large stack and a raised recursion limit; the
stack is reserved address space, touched only as deep as the code goes.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

#: Frames the analysis may use (the default limit is 1,000).
RECURSION_LIMIT = 20_000
#: Bytes of stack for the worker thread: enough for RECURSION_LIMIT frames of the rules.
STACK_BYTES = 512 * 1024 * 1024
_LOCK = threading.Lock()


def deep(fn: Callable[..., T], *args) -> T:
    """``fn(*args)`` in a thread whose stack and recursion limit fit deep trees.

    Exceptions raised by ``fn`` are raised here. Falls back to calling ``fn`` directly
    where the platform refuses the stack size.
    """
    box: dict[str, object] = {}

    def work() -> None:
        try:
            box["value"] = fn(*args)
        except BaseException as exc:  # handed to the caller's thread, raised there
            box["error"] = exc

    with _LOCK:
        try:
            old_stack = threading.stack_size(STACK_BYTES)
        except (ValueError, RuntimeError):  # not supported here: run as before
            return fn(*args)
        old_limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(old_limit, RECURSION_LIMIT))
        try:
            worker = threading.Thread(target=work, name="gradsmith-lint", daemon=True)
            worker.start()
        finally:
            threading.stack_size(old_stack)
        try:
            worker.join()
        finally:
            sys.setrecursionlimit(old_limit)
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[return-value]


__all__ = ["deep"]
