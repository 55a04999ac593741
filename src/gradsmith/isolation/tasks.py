"""Run one discovery or check task in the current process and return plain data (private).

Both the isolating worker (:mod:`gradsmith.isolation.worker`) and the in-process paths (``--no-isolate``,
the pytest plugin) call :func:`run_task`, so a row looks the same wherever it was produced.
A row is a JSON-ready dict; gradient-mismatch Jacobians travel beside it under ``"_jacobians"``
(nested lists of floats, for the HTML report: no NumPy, which is not a dependency) and are dropped from JSON output.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from typing import Any

from gradsmith._errors import GradsmithUsageError
from gradsmith.discovery import (
    Candidate,
    NoInputs,
    Source,
    TargetImportError,
    list_candidates,
    parameter_names,
    resolve_ref,
    synthesize,
)
from gradsmith.repro.capture import MAX_INLINE, capture_args

# Heatmaps of bigger Jacobians are unreadable anyway; crop so results stay small to ship.
_MAX_JACOBIAN_SIDE = 400


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

    try:
        with progress.listening(listener):
            return run_task(task)
    except Exception as exc:  # noqa: BLE001 - a bug in gradsmith: still a result
        return {"worker_error": "".join(
            traceback.format_exception(type(exc), exc, exc.__traceback__)[-6:])}
    except BaseException as exc:  # noqa: BLE001 - raised by user code: the task's result
        return _raised(task, exc, last)


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
        ``following``: what runs after them (deployment checks, more input sets).
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


def _raised(task: tuple, exc: BaseException, last: dict) -> Any:
    what = f"{type(exc).__name__}{f': {exc}' if str(exc) else ''}{_user_frame(exc)}"
    if task[0] == "list":
        return {"import": what}
    candidate, example_index = task[1], task[2]
    running = last.get("running")
    during = f" in the {running} check" if running else ""
    label = display_name(candidate, example_index)
    result = row(candidate, label, "fail", error="exception",
                 reason=f"the Function raised {what}{during}; a BaseException that is not an "
                        "Exception (KeyboardInterrupt, SystemExit, ...) stops any training loop: "
                        "raise an Exception subclass instead")
    if last:
        result.update(checks=last["checks"], report=partial_report(label, last, running),
                      text=last["text"] or None, _text_brief=last["text_brief"] or None)
    return result


def _user_frame(exc: BaseException) -> str:
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if "/gradsmith/" not in f.filename and "importlib" not in f.filename
              and not f.filename.startswith("<frozen")]
    return f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""


def run_task(task: tuple) -> Any:
    """Dispatch ``("list", Source)``, ``("check", Candidate, example_index, options, html)`` or
    ``("bench", Candidate, example_index, options)`` (``gradsmith bench`` on user code)."""
    if task[0] == "list":
        return list_source(task[1])
    if task[0] == "check":
        return check_candidate(*task[1:])
    if task[0] == "bench":
        from gradsmith.bench.user import bench_candidate

        return bench_candidate(*task[1:])
    raise ValueError(f"unknown task {task[0]!r}")


def list_source(source: Source) -> dict:
    """List a source's candidates as ``{"candidates", "errors"}`` or ``{"usage"|"import": msg}``."""
    try:
        listing = list_candidates(source)
    except GradsmithUsageError as exc:
        return {"usage": str(exc)}
    except TargetImportError as exc:
        return {"import": str(exc)}
    return {"candidates": listing.candidates, "errors": listing.errors}


def check_candidate(candidate: Candidate, example_index: int | None, options: dict,
                    html: bool = False) -> dict:
    """Check one candidate on one registered example (or on synthesised inputs when ``None``).

    Args:
        candidate: what to check.
        example_index: index into the candidate's registered examples, or ``None``.
        options: options overriding the example's own (``approximate=True`` from the CLI).
        html: also return the Jacobians of a gradient mismatch, for heatmaps.

    Returns:
        A row dict (see :func:`row`).
    """
    label = display_name(candidate, example_index)
    started = time.perf_counter()
    try:
        obj = resolve_ref(candidate.ref)
    except TargetImportError as exc:
        return row(candidate, label, "fail", error="import", reason=f"import failed: {exc}")
    options = dict(options)
    inline_limit = None if options.pop("_repro_full", False) else MAX_INLINE
    try:
        args, surrogate, merged, inputs, variants = _inputs(obj, example_index, options)
    except _Skip as skip:
        return row(candidate, label, "skip", reason=str(skip))
    except Exception as exc:
        return row(candidate, label, "fail", error="exception",
                   reason=f"building the example inputs raised {_describe(exc)}")
    from gradsmith.checker import check

    sets = [(inputs, args)] + [(v.change, v.args) for v in variants]
    try:
        report = check(obj, *args, surrogate=surrogate, name=label, **merged)
        for index, variant in enumerate(variants, start=1):
            _merge(report, index, variant.change,
                   check(obj, *variant.args, surrogate=surrogate, name=label,
                         **{**merged, "checks": _variant_checks(merged)}))
    except Exception as exc:  # bad registered options, or a verifier bug: one failed row
        return row(candidate, label, "fail", error="exception",
                   reason=f"gradsmith.check raised {_describe(exc)}",
                   elapsed=time.perf_counter() - started)
    seed = int(merged.get("seed", 0))
    repro = None if report.passed else _repro_record(candidate, obj, seed, sets, inline_limit)
    if variants:
        inputs += "; also: " + "; ".join(v.change for v in variants)
    result = row(candidate, label, "pass" if report.passed else "fail", inputs=inputs,
                 elapsed=time.perf_counter() - started, report=report, repro=repro)
    if html and not report.passed:
        result["_jacobians"] = _jacobians(report)
    return result


class _Skip(Exception):
    """The candidate has no usable inputs; the message says how to register some."""


def _inputs(obj: Any, example_index: int | None, options: dict):
    from gradsmith._example import examples_of

    if example_index is None:
        found = synthesize(obj)
        if isinstance(found, NoInputs):
            raise _Skip(found.reason)
        return (found.args, None, dict(options), f"synthesised: {found.description}",
                found.variants)
    ex = examples_of(obj)[example_index]
    return ex.make_args(), ex.surrogate, {**ex.options, **options}, "registered example", ()


# Variant input sets re-run the checks that depend on the values and shapes; the rest
# (hygiene, vmap, randomness...) would only repeat the first set's findings at a higher cost.
_VARIANT_CHECKS = ("structure", "mutation", "gradients", "surrogate", "second_order")


def _variant_checks(options: dict) -> list[str]:
    chosen = options.get("checks")
    chosen = [chosen] if isinstance(chosen, str) else chosen
    return [c for c in _VARIANT_CHECKS if chosen is None or c in chosen] or ["structure"]


def _merge(report: Any, index: int, change: str, other: Any) -> None:
    """Add a variant's new findings to the first report, saying on which inputs they arose."""
    known = {(f.code, f.input) for f in report.findings}
    for f in other.findings:
        if (f.code, f.input) in known or f.code in ("constant-input", "user-warning"):
            continue
        f.details["input_set"] = index
        f.details["inputs"] = change
        f.message = f"[inputs: {change}] {f.message}"
        report.findings.append(f)
    report.elapsed += other.elapsed
    report.sort()


def _repro_record(candidate: Candidate, obj: Any, seed: int, sets: list, inline_limit) -> dict:
    """Seed, source and exact inputs of every input set, for --repro scripts and JSON."""
    names = parameter_names(obj)
    return {"seed": seed,
            "source": {"kind": candidate.ref.kind, "location": candidate.ref.location,
                       "attr": candidate.ref.attr},
            "sets": [{"label": label, "names": names,
                      "args": capture_args(tuple(args), inline_limit or 10 ** 12)}
                     for label, args in sets]}


def display_name(candidate: Candidate, example_index: int | None) -> str:
    """``label::Name`` plus ``[example]`` when the object has several examples."""
    if example_index is None or len(candidate.examples) <= 1:
        return candidate.ref.label
    return f"{candidate.ref.label}[{candidate.examples[example_index]}]"


def row(candidate: Candidate | None, name: str, verdict: str, *, error: str | None = None,
        reason: str | None = None, inputs: str | None = None, elapsed: float = 0.0,
        report: Any = None, repro: dict | None = None) -> dict:
    """Build a result row.

    Keys: ``name``, ``target``, ``file`` and ``line`` (where the candidate is defined; ``None``
    when unknown), ``verdict`` (``pass`` | ``fail`` | ``skip``), ``error``
    (``None`` | ``import`` | ``crash`` | ``timeout`` | ``exception``), ``reason``, ``inputs``,
    ``elapsed`` (seconds), ``checks`` (names run), ``report`` (``Report.to_dict()`` or ``None``),
    ``text`` (``str(report)`` or ``None``) and ``repro`` (failing checked rows: seed, source
    and exact inputs, see :mod:`gradsmith.repro`; else ``None``); ``_text_brief`` is ``text``
    without the "skipped" lines (shown unless ``-v``).

    Example:
        >>> row(None, "ops.py::Bad", "fail", error="timeout", reason="timed out")["verdict"]
        'fail'
    """
    return {
        "name": name,
        "target": candidate.ref.label if candidate is not None else name,
        "file": getattr(candidate, "file", None),
        "line": getattr(candidate, "line", None),
        "verdict": verdict,
        "error": error,
        "reason": reason,
        "inputs": inputs,
        "elapsed": round(float(elapsed if report is None else
                               getattr(report, "elapsed", None) or elapsed), 4),
        "checks": list(getattr(report, "checks", []) or []),
        "report": report.to_dict() if report is not None else None,
        "text": str(report) if report is not None else None,
        # without the "skipped <check>: <reason>" lines: what is shown unless -v
        "_text_brief": report.format(skipped=False) if report is not None else None,
        "repro": repro,
    }


def _jacobians(report: Any) -> dict:
    out = {}
    for label, pair in (getattr(report, "jacobians", None) or {}).items():
        analytic, numerical = (t.detach().to("cpu").double() for t in pair)
        full = tuple(analytic.shape)
        analytic = analytic[:_MAX_JACOBIAN_SIDE, :_MAX_JACOBIAN_SIDE].tolist()
        numerical = numerical[:_MAX_JACOBIAN_SIDE, :_MAX_JACOBIAN_SIDE].tolist()
        out[str(label)] = {"analytic": analytic, "numerical": numerical, "shape": full}
    return out


def _describe(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
    return f"{type(exc).__name__}: {exc}{where}"
