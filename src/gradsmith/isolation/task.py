"""One task, run in the current process: the runner's side of a task (private).

The runner of user code knows nothing of its users (``gradsmith check``, ``gradsmith bench``,
the pytest plugin): a task is ``(kind, *args)`` where ``kind`` is the dotted name of a module
that does the work (:func:`task_module`). The worker (:mod:`gradsmith.isolation.worker`)
imports it, calls its optional ``warm_up`` before forking, and in the task process
(:mod:`gradsmith.isolation.sandbox`) :func:`run_in_worker` runs it so that whatever user code
raises becomes the task's result instead of ending the process.
"""

from __future__ import annotations

import importlib
import traceback
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

from gradsmith._triton import prepare as prepare_triton


def task_module(kind: object) -> Any:
    """The module named by a task's ``kind``. It defines:

    - ``run(*args)``: the work, returning plain data;
    - ``raised(what, *args, progress)``: the result when user code raised a ``BaseException``
      that is not an ``Exception`` (``what`` names it at the user's line; ``progress``, the
      last message the task streamed, or ``{}``);
    - optionally ``listening(on_progress)``: a context manager around ``run`` in a task process,
      through which the task streams plain-data progress messages;
    - optionally ``warm_up(tasks)``: called in the worker server, before it forks for them,
      with the arguments of the tasks of this kind queued, to pay imports once for every fork.

    Raises:
        ValueError: ``kind`` is not a dotted module name of gradsmith.
    """
    if not (isinstance(kind, str) and kind.startswith("gradsmith.")
            and all(part.isidentifier() for part in kind.split("."))):
        raise ValueError(f"unknown task {kind!r}")
    return importlib.import_module(kind)


def run_task(task: tuple) -> Any:
    """Run ``(kind, *args)`` in this process: ``task_module(kind).run(*args)``."""
    # Before any user module is imported: Triton kernels run in its interpreter without a GPU.
    prepare_triton()
    return task_module(task[0]).run(*task[1:])


def run_in_worker(task: tuple, on_progress: Callable[[Any], None]) -> Any:
    """:func:`run_task` in a task process, which must end with a result, never an exception.

    Progress messages of the task's module go to ``on_progress``. What user code raises that
    is not an ``Exception`` (``KeyboardInterrupt``, ``SystemExit``, a ``BaseException``
    subclass) becomes the task's result (the module's ``raised``), named with the user's
    frames only; an ``Exception`` that escapes is a gradsmith bug, returned as
    ``worker_error``.
    """
    last: dict = {}

    def listener(message: Any) -> None:
        if isinstance(message, dict):
            if not message.get("_merge"):  # a merged detail keeps the snapshot it belongs to
                last.clear()
            last.update(message)
        on_progress(message)

    try:
        module = task_module(task[0])
        listening = getattr(module, "listening", None)
        with listening(listener) if listening is not None else nullcontext():
            return run_task(task)
    except Exception as exc:  # noqa: BLE001 - a bug in gradsmith: still a result
        return {"worker_error": "".join(
            traceback.format_exception(type(exc), exc, exc.__traceback__)[-6:])}
    except BaseException as exc:  # noqa: BLE001 - raised by user code: the task's result
        return raised_result(task, exc, last)


def raised_result(task: tuple, exc: BaseException, progress: dict) -> Any:
    """The result of a task whose user code raised ``exc``, a ``BaseException`` that is not an
    ``Exception``: its module's ``raised``, told what was raised at the user's line."""
    text = exception_text(exc)
    what = f"{type(exc).__name__}{f': {text}' if text else ''}{_user_frame(exc)}"
    return task_module(task[0]).raised(what, *task[1:], progress=progress)


def exception_text(exc: BaseException) -> str:
    """``str(exc)``, even when user code made ``__str__`` raise.

    Example:
        >>> exception_text(ValueError("bad"))
        'bad'
    """
    try:
        return str(exc)
    except Exception as inner:
        return f"<its __str__ raised {type(inner).__name__}>"


def _user_frame(exc: BaseException) -> str:
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if "/gradsmith/" not in f.filename and "importlib" not in f.filename
              and not f.filename.startswith("<frozen")]
    return f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
