"""Run one discovery or check task in the current process and return plain data (private).

Both the isolating worker (:mod:`gradsmith.isolation.worker`) and the in-process paths (``--no-isolate``,
the pytest plugin) call :func:`run_task`, so a row looks the same wherever it was produced.
A row is a JSON-ready dict; gradient-mismatch Jacobians travel beside it under ``"_jacobians"``
(nested lists of floats, for the HTML report: no NumPy, which is not a dependency) and are dropped from JSON output.
"""

from __future__ import annotations

import time
import traceback
from typing import Any

from gradsmith._errors import GradsmithUsageError
from gradsmith.discovery import (
    Candidate,
    NoInputs,
    Source,
    TargetImportError,
    list_candidates,
    resolve_ref,
    synthesize,
)

# Heatmaps of bigger Jacobians are unreadable anyway; crop so results stay small to ship.
_MAX_JACOBIAN_SIDE = 400


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
    try:
        args, surrogate, merged, inputs = _inputs(obj, example_index, options)
    except _Skip as skip:
        return row(candidate, label, "skip", reason=str(skip))
    except Exception as exc:
        return row(candidate, label, "fail", error="exception",
                   reason=f"building the example inputs raised {_describe(exc)}")
    from gradsmith.checker import check

    try:
        report = check(obj, *args, surrogate=surrogate, name=label, **merged)
    except Exception as exc:  # bad registered options, or a verifier bug: one failed row
        return row(candidate, label, "fail", error="exception",
                   reason=f"gradsmith.check raised {_describe(exc)}",
                   elapsed=time.perf_counter() - started)
    result = row(candidate, label, "pass" if report.passed else "fail", inputs=inputs,
                 elapsed=time.perf_counter() - started, report=report)
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
        return found.args, None, dict(options), f"synthesised: {found.description}"
    ex = examples_of(obj)[example_index]
    return ex.make_args(), ex.surrogate, {**ex.options, **options}, "registered example"


def display_name(candidate: Candidate, example_index: int | None) -> str:
    """``label::Name`` plus ``[example]`` when the object has several examples."""
    if example_index is None or len(candidate.examples) <= 1:
        return candidate.ref.label
    return f"{candidate.ref.label}[{candidate.examples[example_index]}]"


def row(candidate: Candidate | None, name: str, verdict: str, *, error: str | None = None,
        reason: str | None = None, inputs: str | None = None, elapsed: float = 0.0,
        report: Any = None) -> dict:
    """Build a result row.

    Keys: ``name``, ``target``, ``file`` and ``line`` (where the candidate is defined; ``None``
    when unknown), ``verdict`` (``pass`` | ``fail`` | ``skip``), ``error``
    (``None`` | ``import`` | ``crash`` | ``timeout`` | ``exception``), ``reason``, ``inputs``,
    ``elapsed`` (seconds), ``checks`` (names run), ``report`` (``Report.to_dict()`` or ``None``)
    and ``text`` (``str(report)`` or ``None``); ``_text_brief`` is ``text`` without the
    "skipped" lines (shown unless ``-v``).

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
