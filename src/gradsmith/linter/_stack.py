"""Run a rule again with room for deep syntax trees.

Valid Python can nest far deeper than the interpreter's default recursion limit allows a
recursive reader of its tree: CPython compiles a chain of 1,200 method calls
(``x.t().t()...``) or a sum of 2,500 terms, and a rule that evaluates an expression
recursively would stop with ``RecursionError`` (an internal error, GS003). Such a rule is
run again in a worker thread with a large stack and a raised recursion limit; the stack is
reserved address space, touched only as deep as the code goes. Only the rare rule that
ran out of stack pays for the thread; everything else runs in the caller's thread.
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
        except BaseException:  # Ctrl-C reaches this thread only: stop the worker as well
            _interrupt(worker)
            worker.join(timeout=10)
            box.clear()  # the worker's traceback holds every syntax tree: let them go now
            raise
        finally:
            sys.setrecursionlimit(old_limit)
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[return-value]


def _interrupt(worker: threading.Thread) -> None:
    """Raise KeyboardInterrupt in ``worker`` at its next bytecode (CPython's
    ``PyThreadState_SetAsyncExc``), so that an interrupted lint stops at once instead of
    finishing the analysis no one waits for."""
    import ctypes

    if worker.ident is not None and worker.is_alive():
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(worker.ident),
                                                   ctypes.py_object(KeyboardInterrupt))


__all__ = ["deep"]
