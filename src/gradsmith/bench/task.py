"""``gradsmith bench`` on user code as a task for the isolated worker.

The worker (:mod:`gradsmith.isolation`) knows nothing of benchmarking: a task whose kind is
this module's dotted name (:data:`KIND`) makes it import this module in the task process and
call :func:`run`; when user code raises a ``BaseException`` that is not an ``Exception``,
:func:`raised` gives the task's result instead (see
:func:`gradsmith.isolation.task.task_module`).
"""

from __future__ import annotations

from typing import Any

from gradsmith.bench.user import bench_candidate, error_row

#: The kind of a bench task: ``(KIND, candidate, example_index, options)``.
KIND = __name__


def run(candidate: Any, example_index: int | None, options: dict) -> list[dict]:
    """Measure one candidate on one example (see :func:`gradsmith.bench.user.bench_candidate`)."""
    return bench_candidate(candidate, example_index, options)


def raised(what: str, candidate: Any, example_index: int | None, options: dict, *,
           progress: dict) -> list[dict]:
    """The rows of a task whose user code raised ``what`` (its type, message and line);
    ``progress`` is unused: a bench task streams none."""
    return [error_row(candidate.ref.label, f"the Function raised {what}")]
