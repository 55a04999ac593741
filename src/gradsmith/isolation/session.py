"""Plan and run a ``gradsmith check`` session: list sources, check candidates, collect rows.

The command line (:mod:`gradsmith.cli.check`) only parses arguments and renders what
:func:`run_check` returns; isolation (:mod:`gradsmith.isolation.pool`) and the per-task work
(:mod:`gradsmith.isolation.tasks`) stay behind this one function.
"""

from __future__ import annotations

import fnmatch
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from gradsmith.discovery import Candidate, Source
from gradsmith.isolation.tasks import display_name, row, run_task


@dataclass
class CheckRun:
    """Everything a session produced: rows in a stable order, and usage errors (exit 2)."""

    rows: list[dict] = field(default_factory=list)
    usage_errors: list[str] = field(default_factory=list)
    elapsed: float = 0.0

    def counts(self) -> dict[str, int]:
        """Number of rows per verdict, plus import errors."""
        out = {"passed": 0, "failed": 0, "skipped": 0, "import_errors": 0}
        for r in self.rows:
            out[{"pass": "passed", "fail": "failed", "skip": "skipped"}[r["verdict"]]] += 1
            out["import_errors"] += r["error"] == "import"
        return out

    def exit_code(self) -> int:
        """2 usage or import error; 1 a failure, or nothing checked; 0 at least one pass and
        no failure (skipped rows do not fail a run, but a run of only skips does).

        Example:
            >>> CheckRun(rows=[{"verdict": "skip", "error": None}]).exit_code()
            1
        """
        counts = self.counts()
        if self.usage_errors or counts["import_errors"]:
            return 2
        if counts["failed"] or not counts["passed"]:
            return 1
        return 0


def run_check(sources: list[Source], *, options: dict | None = None, isolate: bool = True,
              jobs: int = 1, timeout: float = 60.0, html: bool = False,
              pattern: str | None = None,
              progress: Callable[[int, int, dict], None] | None = None) -> CheckRun:
    """Check every candidate of ``sources``.

    Args:
        sources: resolved targets (see :func:`gradsmith.discovery.resolve_targets`).
        options: options for :func:`gradsmith.check` overriding the examples' own.
        isolate: run user code in worker processes with a time limit (``False``: in-process).
        jobs: number of worker processes.
        timeout: seconds allowed per task (isolated runs only).
        html: keep the Jacobians of gradient mismatches for the HTML report.
        pattern: keep only candidates whose name contains it (``*``/``?`` globs allowed).
        progress: called as ``progress(done, total, row)`` after each check.

    Returns:
        A :class:`CheckRun`.
    """
    started = time.perf_counter()
    result = CheckRun()
    # Start only as many workers as there can be tasks (`ops.py::Swish` needs one).
    named = [s.names for s in sources]
    if all(n is not None for n in named):
        jobs = max(1, min(jobs, sum(len(n) for n in named)))
    with _executor(isolate, jobs, timeout) as execute:
        candidates = _list(sources, execute, result)
        candidates = [c for c in candidates if _matches(c, pattern)]
        if not candidates and not result.rows and not result.usage_errors:
            what = f" matching -k {pattern!r}" if pattern else ""
            result.usage_errors.append(
                f"check: found no torch.autograd.Function subclass or function with a registered"
                f" example{what} in {', '.join(s.label for s in sources)}; point at the file or "
                "module that defines them, or register one with @gradsmith.example")
        tasks = [("check", c, i, dict(options or {}), html)
                 for c in candidates for i in (range(len(c.examples)) if c.examples else [None])]
        rows: list[dict | None] = [None] * len(tasks)
        for done, (index, kind, value, elapsed) in enumerate(execute(tasks), start=1):
            _, candidate, example_index, *_ = tasks[index]
            rows[index] = value if kind == "ok" else _error_row(candidate, example_index, kind,
                                                                value, elapsed)
            if progress is not None:
                progress(done, len(tasks), rows[index])
        result.rows.extend(r for r in rows if r is not None)
    result.elapsed = time.perf_counter() - started
    return result


def _list(sources: list[Source], execute, result: CheckRun) -> list[Candidate]:
    seen: set[str] = set()
    found: list[Candidate] = []
    outcomes = {i: (k, v) for i, k, v, _ in execute([("list", s) for s in sources])}
    for index, source in enumerate(sources):
        kind, value = outcomes[index]
        if kind != "ok":
            result.rows.append(row(None, source.label, "fail", error="import",
                                   reason=f"importing it: {value}"))
        elif "usage" in value:
            result.usage_errors.append(value["usage"])
        elif "import" in value:
            result.rows.append(row(None, source.label, "fail", error="import",
                                   reason=f"import failed: {value['import']}"))
        else:
            for label, message in value["errors"]:
                result.rows.append(row(None, label, "fail", error="import",
                                       reason=f"import failed: {message}"))
            for candidate in value["candidates"]:
                if candidate.key not in seen:
                    seen.add(candidate.key)
                    found.append(candidate)
    return found


def _matches(candidate: Candidate, pattern: str | None) -> bool:
    if not pattern:
        return True
    name = candidate.ref.label.lower()
    pattern = pattern.lower()
    if any(ch in pattern for ch in "*?["):
        return fnmatch.fnmatch(name, pattern) or fnmatch.fnmatch(candidate.ref.attr.lower(),
                                                                 pattern)
    return pattern in name


def _error_row(candidate: Candidate, example_index: int | None, kind: str, message: str,
               elapsed: float) -> dict:
    return row(candidate, display_name(candidate, example_index), "fail", error=kind,
               reason=message, elapsed=elapsed)


class _executor:
    """Context manager yielding ``execute(tasks) -> iterator of (index, kind, value, s)``."""

    def __init__(self, isolate: bool, jobs: int, timeout: float) -> None:
        self.isolate, self.jobs, self.timeout = isolate, jobs, timeout
        self.pool = None

    def __enter__(self) -> Callable[[list[tuple]], Iterator[tuple]]:
        if not self.isolate:
            return lambda tasks: ((i, *_in_process(t)) for i, t in enumerate(tasks))
        from gradsmith.isolation.pool import WorkerPool

        self.pool = WorkerPool(jobs=self.jobs, timeout=self.timeout)
        self.pool.start()  # checks follow the listing: start every worker while it runs
        return lambda tasks: ((o.index, *_unwrap(o.kind, o.value), o.elapsed)
                              for o in self.pool.run(tasks))

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if self.pool is not None:
            self.pool.close(graceful=exc_type is None)


def _in_process(task: tuple) -> tuple[str, object, float]:
    started = time.perf_counter()
    try:
        return "ok", run_task(task), time.perf_counter() - started
    except Exception as exc:  # a gradsmith bug: still one row, not a traceback
        return ("exception", f"internal error {type(exc).__name__}: {exc}",
                time.perf_counter() - started)


def _unwrap(kind: str, value: object) -> tuple[str, object]:
    if kind == "ok" and isinstance(value, dict) and "worker_error" in value:
        return "exception", f"internal error in the worker:\n{value['worker_error']}"
    return kind, value
