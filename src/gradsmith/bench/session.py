"""Bench the user's own code: list targets and measure each candidate in an isolated worker.

The same discovery as ``gradsmith check`` (files, directories, dotted modules, ``FILE::Fn``)
and the same worker pool: user code is imported and run only in a worker process with a time
limit, so a crash or hang becomes a row with an error, never a gradsmith traceback. One worker
measures at a time (timings of two workers sharing the cores would disturb each other).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from gradsmith.bench import task as bench_task
from gradsmith.bench.user import error_row
from gradsmith.discovery import Candidate, Source
from gradsmith.discovery import task as list_task

__all__ = ["BenchRun", "run_targets"]


@dataclass
class BenchRun:
    """Rows measured (one per candidate, example and mode) and usage errors (exit 2)."""

    rows: list[dict] = field(default_factory=list)
    usage_errors: list[str] = field(default_factory=list)


def run_targets(sources: list[Source], options: dict[str, Any], *, isolate: bool = True,
                timeout: float = 600.0, threads: int | None = None,
                progress: Callable[[str], None] | None = None) -> BenchRun:
    """Measure every candidate of ``sources`` on each of its examples.

    Args:
        sources: from :func:`gradsmith.discovery.resolve_targets`.
        options: for :func:`gradsmith.bench.user.bench_candidate` (``repeat``, ``warmup``,
            ``modes``, ``device``, ``peak``).
        isolate: run user code in a worker process (``False``: in this process).
        timeout: seconds allowed per candidate and example, all modes together.
        threads: torch threads in the worker (default: all CPUs).
        progress: called with a label before each measurement.

    Returns:
        A :class:`BenchRun`.
    """
    import os

    result = BenchRun()
    with _executor(isolate, timeout, threads or os.cpu_count() or 1) as execute:
        candidates = _list(sources, execute, result)
        if not candidates and not result.rows and not result.usage_errors:
            result.usage_errors.append(
                "gradsmith bench: found no torch.autograd.Function subclass or function with a "
                f"registered example in {', '.join(s.label for s in sources)}; point at the "
                "file or module that defines them")
        tasks = [(bench_task.KIND, c, i, options)
                 for c in candidates for i in (range(len(c.examples)) if c.examples else [None])]
        for task in tasks:  # one at a time, in order: progress shows what is being measured
            if progress is not None:
                progress(task[1].ref.label)
            for _, kind, value in execute([task]):
                if kind == "ok" and isinstance(value, list):
                    result.rows.extend(value)
                else:
                    result.rows.append(error_row(task[1].ref.label, _describe(kind, value)))
    return result


def _describe(kind: str, value: Any) -> str:
    if isinstance(value, dict) and "worker_error" in value:
        return f"internal error in the worker:\n{value['worker_error']}"
    return f"{kind}: {value}"


def _list(sources: list[Source], execute, result: BenchRun) -> list[Candidate]:
    seen: set[str] = set()
    found: list[Candidate] = []
    outcomes = {i: (k, v) for i, k, v in execute([(list_task.KIND, s) for s in sources])}
    for index, source in enumerate(sources):
        kind, value = outcomes[index]
        if kind != "ok":
            result.rows.append(error_row(source.label, f"importing it: {value}"))
        elif "usage" in value:
            result.usage_errors.append(value["usage"].replace("check:", "gradsmith bench:", 1))
        elif "import" in value:
            result.rows.append(error_row(source.label, f"import failed: {value['import']}"))
        else:
            for label, message in value["errors"]:
                result.rows.append(error_row(label, f"import failed: {message}"))
            for candidate in value["candidates"]:
                if candidate.key not in seen:
                    seen.add(candidate.key)
                    found.append(candidate)
    return found


class _executor:
    """Context manager yielding ``execute(tasks) -> iterator of (index, kind, value)``."""

    def __init__(self, isolate: bool, timeout: float, threads: int) -> None:
        self.isolate, self.timeout, self.threads = isolate, timeout, threads
        self.pool = None

    def __enter__(self) -> Callable[[list[tuple]], Iterator[tuple]]:
        from gradsmith.isolation.task import run_task

        if not self.isolate:
            return lambda tasks: ((i, "ok", run_task(t)) for i, t in enumerate(tasks))
        from gradsmith.isolation.pool import WorkerPool

        self.pool = WorkerPool(jobs=1, timeout=self.timeout, threads=self.threads,
                               modules=(list_task.KIND, bench_task.KIND))
        self.pool.start()
        return lambda tasks: ((o.index, o.kind, o.value) for o in self.pool.run(tasks))

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if self.pool is not None:
            self.pool.close(graceful=exc_type is None)
