"""Plan and run a ``gradsmith check`` session: list sources, check candidates, collect rows.

The command line (:mod:`gradsmith.cli.check`) only parses arguments and renders what
:func:`run_check` returns; isolation (:mod:`gradsmith.isolation.pool`) and the per-task work
(:mod:`gradsmith.checkrun.task`, handed to the worker by its module's name) stay behind this
one function.
"""

from __future__ import annotations

import fnmatch
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

from gradsmith.checkrun import task as check_task
from gradsmith.checkrun.backward_stage import (
    backward_returned,
    crash_in_backward,
    died,
    mark_backward_crash,
    mark_synthesis_crash,
)
from gradsmith.checkrun.partial import add_partial, partial_report
from gradsmith.checkrun.probe_crash import died_probing, mark_probe_crash
from gradsmith.checkrun.task import display_name, row
from gradsmith.discovery import Candidate, Source
from gradsmith.discovery import task as list_task
from gradsmith.discovery.prefilter import needs_import
from gradsmith.discovery.static import file_candidates
from gradsmith.isolation.pool import STARTUP_TIMEOUT, Outcome
from gradsmith.isolation.processes import sigint_watch
from gradsmith.isolation.task import raised_result, run_task

# What the worker server imports once, before its first task, so that no task's fork pays
# for it: the verifier (the command line process itself never imports torch) and the tasks.
WORKER_MODULES = ("gradsmith.checker", list_task.KIND, check_task.KIND)


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
              jobs: int = 1, timeout: float = 60.0, startup_timeout: float = STARTUP_TIMEOUT,
              html: bool = False, pattern: str | None = None,
              progress: Callable[[int, int, dict], None] | None = None,
              status: Callable[[str], None] | None = None,
              eager: Callable[[str, dict], None] | None = None) -> CheckRun:
    """Check every candidate of ``sources``.

    Args:
        sources: resolved targets (see :func:`gradsmith.discovery.resolve_targets`).
        options: options for :func:`gradsmith.check` overriding the examples' own.
        isolate: run user code in worker processes with a time limit (``False``: in-process).
        jobs: tasks run at once (isolated runs; callers cap it with
            :func:`gradsmith.isolation.pool.capacity`).
        timeout: seconds allowed per task, importing the user's code included (isolated runs).
        startup_timeout: seconds the worker may take to start (isolated runs).
        html: keep the Jacobians of gradient mismatches for the HTML report.
        pattern: keep only candidates whose name contains it (``*``/``?`` globs allowed).
        progress: called as ``progress(done, total, row)`` after each check.
        status: called with a short line saying what is going on (starting the worker,
            importing a target, the check a Function is in), for a live display.
        eager: called as ``eager(name, snapshot)`` once per task when its eager checks have
            finished and slower work (deployment checks, more input sets) follows, so the
            core verdict can be shown before it (isolated runs; see
            :func:`gradsmith.checkrun.partial.snapshot`).

    Returns:
        A :class:`CheckRun`.
    """
    started = time.perf_counter()
    result = CheckRun()
    say = status or (lambda _text: None)
    with _executor(isolate, jobs, timeout, startup_timeout, say) as execute:
        say(f"importing {_plural(len(sources), 'target')}")
        candidates = _list(sources, execute, result)
        candidates = [c for c in candidates if _matches(c, pattern)]
        if not candidates and not result.rows and not result.usage_errors:
            what = f" matching -k {pattern!r}" if pattern else ""
            result.usage_errors.append(
                f"check: found no torch.autograd.Function subclass or function with a registered"
                f" example{what} in {', '.join(s.label for s in sources)}; point at the file or "
                "module that defines them, or register one with @gradsmith.example")
        tasks = [(check_task.KIND, c, i, dict(options or {}), html)
                 for c in candidates for i in (range(len(c.examples)) if c.examples else [None])]
        labels = [display_name(t[1], t[2]) for t in tasks]
        rows: list[dict | None] = [None] * len(tasks)

        told: set[int] = set()

        def on_progress(index: int, snap: dict) -> None:
            if snap.get("running"):
                say(f"{labels[index]}: {snap['running']}")
                if eager is not None and snap.get("eager_done") and index not in told:
                    told.add(index)
                    eager(labels[index], snap)

        for done, outcome in enumerate(execute(tasks, on_progress), start=1):
            _, candidate, example_index, *_ = tasks[outcome.index]
            if outcome.kind == "ok" and not _is_row(outcome.value):
                outcome = replace(outcome, kind="crash", value=_MALFORMED)
            rows[outcome.index] = (outcome.value if outcome.kind == "ok" else
                                   _error_row(candidate, example_index, outcome))
            if progress is not None:
                progress(done, len(tasks), rows[outcome.index])
        result.rows.extend(r for r in rows if r is not None)
    result.elapsed = time.perf_counter() - started
    return result


_MALFORMED = ("its result was not gradsmith's (user code replaced or forged it), so no "
              "verdict can be trusted")
_ROW_KEYS = frozenset(row(None, "", "pass"))


def _is_row(value: object) -> bool:
    """A result row as :func:`gradsmith.checkrun.task.row` builds it (a worker's result is
    data user code could have forged; what the output code needs must be there)."""
    return (isinstance(value, dict) and _ROW_KEYS <= set(value)
            and value["verdict"] in ("pass", "fail", "skip") and isinstance(value["name"], str)
            and value["error"] in (None, "import", "crash", "timeout", "exception",
                                   "incomplete")
            and (value["report"] is None or isinstance(value["report"], dict)))


def _is_listing(value: object) -> bool:
    if not isinstance(value, dict):
        return False
    if "usage" in value or "import" in value:
        return isinstance(value.get("usage", value.get("import")), str)
    return (isinstance(value.get("candidates"), list)
            and all(isinstance(c, Candidate) for c in value["candidates"])
            and isinstance(value.get("errors"), list)
            and all(isinstance(e, (list, tuple)) and len(e) == 2 for e in value["errors"]))


def _list(sources: list[Source], execute, result: CheckRun) -> list[Candidate]:
    seen: set[str] = set()
    found: list[Candidate] = []
    # A file that certainly holds no candidate is not imported (a task each: minutes for a
    # directory of thousands of files); it makes no row, as when it is imported and has none.
    sources = [s for s in sources if needs_import(s)]
    outcomes = {o.index: o for o in execute([(list_task.KIND, s) for s in sources], None)}
    for index, source in enumerate(sources):
        kind, value = outcomes[index].kind, outcomes[index].value
        if kind == "ok" and not _is_listing(value):
            kind, value = "crash", _MALFORMED
        if kind != "ok":
            result.rows.extend(_import_rows(source, f"importing it: {value}"))
        elif "usage" in value:
            result.usage_errors.append(value["usage"])
        elif "import" in value:
            result.rows.extend(_import_rows(source, f"import failed: {value['import']}"))
        else:
            for label, message in value["errors"]:
                result.rows.append(row(None, label, "fail", error="import",
                                       reason=f"import failed: {message}"))
            for candidate in value["candidates"]:
                if candidate.key not in seen:
                    seen.add(candidate.key)
                    found.append(candidate)
    return found


def _import_rows(source: Source, reason: str) -> list[dict]:
    """The failing rows of a source that could not be imported: one per ``::Name`` asked for,
    else one per Function its file's syntax tree shows, else one for the file or module. A
    broken import hides no target, and each row counts as an import error (exit 2)."""
    names = source.names or (file_candidates(source.location)
                             if source.kind == "file" and not source.problem else ())
    labels = [f"{source.label}::{name}" for name in names] or [source.label]
    return [row(None, label, "fail", error="import", reason=reason) for label in labels]


def _matches(candidate: Candidate, pattern: str | None) -> bool:
    if not pattern:
        return True
    name = candidate.ref.label.lower()
    pattern = pattern.lower()
    if any(ch in pattern for ch in "*?["):
        return fnmatch.fnmatch(name, pattern) or fnmatch.fnmatch(candidate.ref.attr.lower(),
                                                                 pattern)
    return pattern in name


def _error_row(candidate: Candidate, example_index: int | None, outcome: Outcome) -> dict:
    """A crash, timeout or internal error, with what the checks that finished had found."""
    label = display_name(candidate, example_index)
    snap = outcome.progress
    repro = (snap or {}).get("repro")  # the exact inputs, known before the checks started
    if snap is not None and "checks" not in snap:
        snap = None  # it ended before its first check: nothing was found yet
    reason = outcome.value
    if outcome.kind == "timeout" and snap is not None and snap.get("in_deployment"):
        return _deployment_timeout_row(candidate, label, outcome, snap)
    if snap is not None and outcome.kind in ("crash", "timeout"):
        running = snap.get("running")
        where = (f"in the {running} check" if running else "after the last check")
        finished = ", ".join(snap["checks"]) or "none"
        verb = "ran out of time" if outcome.kind == "timeout" else "died"
        reason = (f"{verb} {where} (finished: {finished}; their findings are below): "
                  f"{reason}")
    out = row(candidate, label, "fail", error=outcome.kind, reason=reason,
              elapsed=outcome.elapsed, repro=repro, inputs=_inputs_text(repro))
    if snap is not None:
        add_partial(out, label, snap)
    dead = died(outcome.kind, outcome.value)
    function = crash_in_backward(outcome.progress) if dead else None
    if function is not None:
        mark_backward_crash(out, function, demonstrated=repro is not None)
    elif dead and repro is None and backward_returned(outcome.progress):
        mark_synthesis_crash(out, backward_returned(outcome.progress))
    elif dead and died_probing(outcome.progress, example_index):
        mark_probe_crash(out)  # forward on candidate inputs: not placed on inputs that fit
    return out


def _deployment_timeout_row(candidate: Candidate, label: str, outcome: Outcome,
                            snap: dict) -> dict:
    """Time ran out in a deployment check, after every eager check had finished. The eager
    checks' findings are kept, but a check that did not finish cannot have held (a compile or
    export mismatch is an error), so a row the eager checks would pass is INCOMPLETE, naming
    the check that ran out of time; an eager error still FAILs it."""
    running = snap["running"]
    finding = {
        "code": "deployment-timeout", "severity": "warning",
        "message": f"the {running} check ran out of time ({outcome.value.split(' (')[0]}) "
                   "after every eager check had finished; it and the deployment checks after "
                   "it did not run, so the row is INCOMPLETE (a compile or export mismatch "
                   "would be an error)",
        "hint": "raise --timeout if it is just slow (compiling takes seconds), or skip the "
                "deployment checks with --no-compat; a Function that hangs under torch.compile "
                "or torch.export hangs where it is deployed that way",
        "check": running, "input": None, "details": {"incomplete": True}}
    findings = snap["findings"] + [finding]
    failed = any(f["severity"] == "error" for f in snap["findings"])
    line = f"  WARNING deployment-timeout: {finding['message']}\n    fix: {finding['hint']}"
    out = row(candidate, label, "fail", error=None if failed else "incomplete",
              elapsed=outcome.elapsed, inputs=_inputs_text(snap.get("repro")),
              reason=f"the deployment checks ran out of time in {running}; the eager checks "
                     f"all finished ({', '.join(snap['checks'])})")
    report = partial_report(label, snap, running)
    report.update(findings=findings, passed=False)
    out["repro"] = snap.get("repro")
    out.update(checks=list(snap["checks"]), report=report,
               text="\n".join(filter(None, [snap["text"], line])),
               _text_brief="\n".join(filter(None, [snap["text_brief"], line])))
    return out


def _inputs_text(repro: dict | None) -> str | None:
    """The Inputs column of a row whose task ended early, from the repro record it streamed
    before its first check (its input sets' labels, as a finished row says them)."""
    sets = (repro or {}).get("sets") or []
    if not sets:
        return None
    also = "; also: " + "; ".join(s["label"] for s in sets[1:]) if len(sets) > 1 else ""
    return f"{sets[0]['label']}{also}"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


class _executor:
    """Context manager yielding ``execute(tasks, on_progress) -> iterator of Outcome``."""

    def __init__(self, isolate: bool, jobs: int, timeout: float, startup_timeout: float,
                 say: Callable[[str], None]) -> None:
        self.isolate, self.jobs, self.timeout = isolate, jobs, timeout
        self.startup_timeout, self.say = startup_timeout, say
        self.pool = None

    def __enter__(self) -> Callable[..., Iterator[Outcome]]:
        if not self.isolate:
            return lambda tasks, _on_progress: (_in_process(i, t) for i, t in enumerate(tasks))
        from gradsmith.isolation.pool import WorkerPool

        def on_wait(seconds: float) -> None:
            self.say(f"starting the worker (importing torch) {seconds:.0f} s")

        self.pool = WorkerPool(jobs=self.jobs, timeout=self.timeout,
                               startup_timeout=self.startup_timeout, on_wait=on_wait,
                               modules=WORKER_MODULES)
        self.pool.start()  # its torch import overlaps the rest of the start-up
        return lambda tasks, on_progress: (_unwrap(o) for o in self.pool.run(tasks,
                                                                             on_progress))

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if self.pool is not None:
            self.pool.close(graceful=exc_type is None)


def _in_process(index: int, task: tuple) -> Outcome:
    started = time.perf_counter()
    with sigint_watch() as sigint:
        try:
            return Outcome(index, "ok", run_task(task), time.perf_counter() - started)
        except Exception as exc:  # a gradsmith bug: still one row, not a traceback
            return Outcome(index, "exception", f"internal error {type(exc).__name__}: {exc}",
                           time.perf_counter() - started)
        except BaseException as exc:  # SystemExit & co from user code: its row, not the end
            if isinstance(exc, KeyboardInterrupt) and sigint:  # Ctrl-C: the run stops
                raise
            return Outcome(index, "ok", raised_result(task, exc, {}),
                           time.perf_counter() - started)


def _unwrap(outcome: Outcome) -> Outcome:
    value = outcome.value
    if outcome.kind == "ok" and isinstance(value, dict) and "worker_error" in value:
        return Outcome(outcome.index, "exception",
                       f"internal error in the worker:\n{value['worker_error']}",
                       outcome.elapsed, outcome.progress)
    return outcome
