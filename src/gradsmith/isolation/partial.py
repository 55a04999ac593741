"""What a task found before it ended, and how it ended, as plain data (private).

A task process (:mod:`gradsmith.isolation.sandbox`) runs :func:`run_in_worker`: progress
snapshots stream out at every check boundary, so a task that crashes or runs out of time still
has the findings of the checks that finished (:func:`partial_report`), and whatever user code
raises becomes the task's result instead of ending the process.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any

from gradsmith.isolation.tasks import (
    INPUTS_KNOWN,
    display_name,
    exception_text,
    row,
    run_task,
    task_module,
)


def run_in_worker(task: tuple, on_progress: Callable[[dict], None]) -> Any:
    """:func:`run_task` in a task process, which must end with a result, never an exception.

    Progress snapshots (see :func:`snapshot`) go to ``on_progress`` at every check boundary.
    What user code raises that is not an ``Exception`` (``KeyboardInterrupt``, ``SystemExit``,
    a ``BaseException`` subclass) becomes the task's result, named with the user's frames
    only; an ``Exception`` that escapes is a gradsmith bug, returned as ``worker_error``.
    """
    from gradsmith.checker import progress

    last: dict = {}
    reports: list = []  # one per check() call: the input sets a task checks, in order

    def listener(name: str | None, report: Any) -> None:
        if not reports or reports[-1] is not report:
            reports.append(report)
        last.clear()
        last.update(snapshot(name, reports))
        on_progress(dict(last))

    def inputs_known(record: dict) -> None:
        on_progress({"repro": record})  # once: the parent keeps it beside later snapshots

    token = INPUTS_KNOWN.set(inputs_known)
    try:
        with progress.listening(listener):
            return run_task(task)
    except Exception as exc:  # noqa: BLE001 - a bug in gradsmith: still a result
        return {"worker_error": "".join(
            traceback.format_exception(type(exc), exc, exc.__traceback__)[-6:])}
    except BaseException as exc:  # noqa: BLE001 - raised by user code: the task's result
        return raised_result(task, exc, last)
    finally:
        INPUTS_KNOWN.reset(token)


def snapshot(running: str | None, reports: list) -> dict:
    """What a task's checks have found so far, as plain data.

    Args:
        running: the check in progress (``None`` when the last one finished).
        reports: the :class:`~gradsmith.checker.report.Report` of every ``check`` call the
            task made so far (one per input set), the last one still being filled.

    Returns:
        ``running`` (with the input set when it is not the first), ``checks`` finished,
        ``skipped``, ``findings`` (dicts), ``text`` and ``text_brief`` (the findings as a
        report prints them, with and without the skipped checks), ``eager_done``: every
        eager check of the first input set has finished, so the core verdict is known, and
        ``following``: what runs after them (deployment checks, more input sets), and
        ``in_deployment``: the check running is a deployment check (compile, export, ...).
    """
    from gradsmith.checker.deploy import DEPLOY_MODULES
    from gradsmith.checker.report import Report

    partial = Report(reports[-1].name)
    for report in reports:
        known = {(f.code, f.input) for f in partial.findings}
        partial.findings += [f for f in report.findings if (f.code, f.input) not in known]
        partial.checks += [c for c in report.checks if c not in partial.checks]
        partial.skipped.update(report.skipped)
    partial.sort()
    eager_done = len(reports) > 1 or running is None or running in DEPLOY_MODULES
    following = ("the deployment checks" if running in DEPLOY_MODULES else
                 "more input sets" if len(reports) > 1 else "")
    if running and len(reports) > 1:
        running = f"{running} (input set {len(reports)})"
    return {"running": running, "eager_done": eager_done, "following": following,
            "in_deployment": running in DEPLOY_MODULES,
            "checks": list(partial.checks), "skipped": dict(partial.skipped),
            "findings": [f.to_dict() for f in partial.findings],
            "text": "\n".join(partial.format().splitlines()[1:]),
            "text_brief": "\n".join(partial.format(skipped=False).splitlines()[1:])}


def partial_report(name: str, progress: dict | None, unfinished: str | None) -> dict | None:
    """A report dict (the shape of ``Report.to_dict()``) from the last progress snapshot of a
    check that did not finish, with ``unfinished`` naming the check it was in."""
    if not progress:
        return None
    return {"name": name, "passed": False, "elapsed": 0.0, "checks": progress["checks"],
            "skipped": progress["skipped"], "saved_bytes": None,
            "findings": progress["findings"], "jacobians": {}, "unfinished": unfinished}


def raised_result(task: tuple, exc: BaseException, last: dict) -> Any:
    """The result of a task whose user code raised ``exc``, a ``BaseException`` that is not
    an ``Exception``: the row (or listing) naming it at the user's line, with what the checks
    that finished (``last``, a snapshot) had found."""
    text = exception_text(exc)
    what = f"{type(exc).__name__}{f': {text}' if text else ''}{_user_frame(exc)}"
    if task[0] == "list":
        return {"import": what}
    if task[0] != "check":  # another user's task: its module says what the result is
        return task_module(task[0]).raised(what, *task[1:])
    candidate, example_index = task[1], task[2]
    running = last.get("running")
    during = f" in the {running} check" if running else ""
    label = display_name(candidate, example_index)
    result = row(candidate, label, "fail", error="exception",
                 reason=f"the Function raised {what}{during}; a BaseException that is not an "
                        "Exception (KeyboardInterrupt, SystemExit, ...) stops any training loop: "
                        "raise an Exception subclass instead")
    if last:
        add_partial(result, label, last)
    return result


def add_partial(result: dict, label: str, snap: dict) -> None:
    """Put into ``result`` (a row) what the checks that finished had found: ``snap``'s checks,
    findings (as a report unfinished in its ``running`` check) and text."""
    result.update(checks=list(snap["checks"]),
                  report=partial_report(label, snap, snap.get("running")),
                  text=snap["text"] or None, _text_brief=snap["text_brief"] or None)


def _user_frame(exc: BaseException) -> str:
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if "/gradsmith/" not in f.filename and "importlib" not in f.filename
              and not f.filename.startswith("<frozen")]
    return f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
