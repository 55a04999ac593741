"""A ``gradsmith check`` task: check one candidate on one example, as plain data (private).

The isolated worker knows nothing of checking: a task whose kind is this module's dotted name
(:data:`KIND`) makes it import this module, call :func:`warm_up` in its server and
:func:`run` within :func:`listening` in the task process (:mod:`gradsmith.isolation.task`).
The in-process paths (``--no-isolate``, the pytest plugin) call the same :func:`run`, so a row
looks the same wherever it was produced.
A row is a JSON-ready dict; gradient-mismatch Jacobians travel beside it under ``"_jacobians"``
(nested lists of floats, for the HTML report: no NumPy, which is not a dependency) and are dropped from JSON output.
"""

from __future__ import annotations

import os
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from gradsmith.checkrun.backward_stage import tracking
from gradsmith.checkrun.guesses import confirmed, guess_checks
from gradsmith.checkrun.partial import add_partial, snapshot
from gradsmith.checkrun.probe_crash import PROBING
from gradsmith.checkrun.sets import check_sets
from gradsmith.discovery import (
    Candidate,
    NoInputs,
    TargetImportError,
    parameter_names,
    resolve_ref,
    synthesize,
)
from gradsmith.discovery.doubt import phase_doubt
from gradsmith.discovery.lacked import lacked_by_synthesised
from gradsmith.discovery.probe import complex_of_real
from gradsmith.discovery.working_dir import kept
from gradsmith.isolation.task import exception_text
from gradsmith.repro.capture import MAX_INLINE, capture_args, capture_ties

# Heatmaps of bigger Jacobians are unreadable anyway; crop so results stay small to ship.
_MAX_JACOBIAN_SIDE = 400

#: Called with a check task's repro record once its inputs are built, before any check runs:
#: the worker streams it, so a row whose task then crashes or times out still carries it.
INPUTS_KNOWN: ContextVar[Callable[[dict], None] | None] = ContextVar(
    "gradsmith_inputs_known", default=None)

# Called once the candidate's module is imported (see IMPORTS_FIRST); set by listening().
_IMPORTED: ContextVar[Callable[[], None]] = ContextVar("gradsmith_imported",
                                                      default=lambda: None)

#: The kind of a check task: ``(KIND, candidate, example_index, options, html)``.
KIND = __name__
#: A check task imports the user's code first: the worker gives that import the start-up limit
#: (a module of 300 Functions, or one importing a large library, is not the Function's time)
#: and starts the task's own ``--timeout`` when :func:`check_candidate` says it is done.
IMPORTS_FIRST = True
# What warm_up has paid for in this process: "core" (the eager checks), "deploy" (also the
# deployment checks), "onnx" (the opt-in ONNX check's exporters).
_WARMED: set[str] = set()


def run(candidate: Candidate, example_index: int | None, options: dict,
        html: bool = False) -> dict:
    """Check one candidate on one example (see :func:`check_candidate`), in the working
    directory it started in whatever folder the check ran in (discovery.working_dir). A
    Function that refuses ``torch.autograd.grad`` by design (a reentrant checkpoint) is
    differentiated through ``.backward()``, in synthesis's probes too (checker.reentrant)."""
    from gradsmith.checker.reentrant import backward_when_refused

    with kept(), backward_when_refused():
        return check_candidate(candidate, example_index, options, html)


def raised(what: str, candidate: Candidate, example_index: int | None, options: dict,
           html: bool = False, *, progress: dict) -> dict:
    """The row of a check whose Function raised ``what``, a ``BaseException`` that is not an
    ``Exception``, with what the checks that finished (``progress``, the last snapshot the
    task streamed, see :func:`listening`) had found."""
    last = progress if "checks" in progress else {}  # not the repro record sent before them
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


@contextmanager
def listening(on_progress: Callable[[dict], None]) -> Iterator[None]:
    """Stream a task's progress: its repro record (``{"repro": ...}``) once its inputs are
    built, then a snapshot (:func:`gradsmith.checkrun.partial.snapshot`) at every check
    boundary, so a task that crashes or runs out of time still has the findings of the checks
    that finished. Only a task process listens: there a process group of one inherited
    through the fork is replaced first (its collectives would hang; see
    :func:`gradsmith.discovery.process_group.renew_inherited`)."""
    from gradsmith.checker import progress
    from gradsmith.discovery.process_group import renew_inherited

    renew_inherited()

    reports: list = []  # one per check() call: the input sets a task checks, in order

    def listener(name: str | None, report: Any) -> None:
        if not reports or reports[-1] is not report:
            reports.append(report)
        on_progress(snapshot(name, reports))

    token = INPUTS_KNOWN.set(lambda record: on_progress({"repro": record}))
    # imported: the sandbox starts the task's own time limit; then, until the repro record
    # replaces it, the task is finding its inputs (see checkrun.probe_crash)
    imported = _IMPORTED.set(lambda: (on_progress({"imported": True}),
                                      on_progress({"_merge": True, PROBING: True})))
    try:
        with progress.listening(listener), tracking(on_progress):
            yield
    finally:
        INPUTS_KNOWN.reset(token)
        _IMPORTED.reset(imported)


def warm_up(tasks: list[tuple]) -> None:
    """Pay the verifier's lazy imports (torch.func, Dynamo; for the deployment checks, compile
    and export and their first-call set-up: seconds, tens of seconds on a loaded machine) once
    in the worker server, before the first check task forks, so that every fork inherits them
    and no task's time limit pays for them. ``tasks``: the queued tasks' arguments."""
    if _gpu_visible():
        return
    deploy = any(t[2].get("compat", t[2].get("_defaults", {}).get("compat")) is True
                 for t in tasks)
    wanted = "deploy" if deploy else "core"
    # The opt-in ONNX check imports its exporters on first use (10 s and more).
    onnx = any(t[2].get("onnx") is True for t in tasks) and "onnx" not in _WARMED
    if wanted not in _WARMED or onnx:
        _check_a_tiny_function(deploy=deploy, onnx=onnx)
        _WARMED.update({"core", wanted} | ({"onnx"} if onnx else set()))


def _gpu_visible() -> bool:
    """Whether a CUDA GPU is visible, asked without initialising CUDA (the pool's server runs
    with ``PYTORCH_NVML_BASED_CUDA_CHECK=1``). There the warm-up is skipped: compiling even a
    CPU function initialises the CUDA driver (seen on an H200 with torch 2.11), and no fork of
    the server could use the GPU afterwards; each task pays its own first compile instead."""
    import torch

    try:
        return torch.cuda.device_count() > 0
    except Exception:  # noqa: BLE001 - a broken CUDA setup is no GPU here
        return False


def _check_a_tiny_function(deploy: bool = False, onnx: bool = False) -> None:
    import torch

    # CPU only: the server forks every task, and a CUDA context made here (the autocast check
    # runs on every visible GPU) could not be used by any fork.
    available, torch.cuda.is_available = torch.cuda.is_available, lambda: False
    try:
        from gradsmith.checker import check
        from gradsmith.examples.gradient_control import Square

        check(Square, torch.ones(2, dtype=torch.float64, requires_grad=True),
              compat=deploy, onnx=onnx)
    except Exception:  # a broken verifier shows up, with context, in the first real task
        pass
    finally:
        torch.cuda.is_available = available


def check_candidate(candidate: Candidate, example_index: int | None, options: dict,
                    html: bool = False) -> dict:
    """Check one candidate on one registered example (or on synthesised inputs when ``None``).

    Args:
        candidate: what to check.
        example_index: index into the candidate's registered examples, or ``None``.
        options: options overriding the example's own (``approximate=True`` from the CLI);
            ``_defaults``, options the example's own override (the CLI's ``compat=True``).
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
    _IMPORTED.get()()  # isolated: the task's own time limit starts now
    started = time.perf_counter()
    options = dict(options)
    inline_limit = None if options.pop("_repro_full", False) else MAX_INLINE
    defaults = options.pop("_defaults", {})  # the caller's, below the example's own options
    try:
        args, surrogate, merged, inputs, variants, doubt, others, flagged = _inputs(
            obj, example_index, options)
        merged = {**defaults, **merged}
    except _Skip as skip:
        if example_index is None:  # no input runs it: does its code prove none can?
            from gradsmith.checker.never_returns import never_returns_report

            if (report := never_returns_report(obj, label)) is not None:
                return row(candidate, label, "fail", report=report,
                           inputs="none: forward's code raises before it can return",
                           elapsed=time.perf_counter() - started)
        return row(candidate, label, "skip", reason=str(skip))
    except Exception as exc:
        return row(candidate, label, "fail", error="exception",
                   reason=f"building the example inputs raised {_describe(exc)}")
    sets = [(inputs, args)] + [(v.change, v.args) for v in variants]
    seed = int(merged.get("seed", 0))
    record = _repro_record(candidate, obj, seed, sets, inline_limit)
    if INPUTS_KNOWN.get() is not None:
        INPUTS_KNOWN.get()(record)
    try:
        report, inputs, sets, reshaped = check_sets(
            obj, label, surrogate, merged, inputs, sets, synthesised=example_index is None)
    except Exception as exc:  # bad registered options, user code, or a verifier bug
        if _raised_in_user_code(exc):
            who = (f"user code raised {_describe(exc)} while gradsmith.check handled the "
                   "Function (e.g. in an exception's __str__ or an object's __repr__)")
        else:
            who = f"gradsmith.check raised {_describe(exc)}"
        return row(candidate, label, "fail", error="exception", reason=who,
                   elapsed=time.perf_counter() - started)
    # imported here: this module is imported by the command-line process, which never imports
    # torch (tests/isolation/test_startup.py); gradsmith.checker does
    from gradsmith.checker.iterations import converged, iteration_positions

    if report.codes("error") == {"gradient-mismatch"} and (
            loops := iteration_positions(obj, args)):  # num_iters=5: a solve stopped early
        report = converged(lambda s: check_sets(obj, label, surrogate, {
            **merged, "compat": False}, inputs, s, example_index is None)[0],
                           sets, loops, report, parameter_names(obj)) or report
    if doubt and report.codes("error") and report.codes("error") <= _explained(doubt):
        # backward raised on every synthesised layout with an argument of a guessed kind:
        # the inputs', not shown to be the Function's (an error here is demonstrated harm)
        return row(candidate, label, "skip", reason=doubt, inputs=inputs,
                   elapsed=time.perf_counter() - started)
    if example_index is None and (phase := phase_doubt(obj, [(f.code, f.message)
                                                             for f in report.errors])):
        return row(candidate, label, "skip", reason=phase, inputs=inputs,
                   elapsed=time.perf_counter() - started)  # eig's vectors, a random cotangent
    if example_index is None and (lacked := lacked_by_synthesised(obj, args, report.errors)):
        return row(candidate, label, "skip", reason=lacked, inputs=inputs,
                   elapsed=time.perf_counter() - started)  # op.adjoint on a synthesised module
    if example_index is None and not reshaped:  # a FAIL on guessed inputs holds on another guess
        report = confirmed(report, args, others, lambda a: check_sets(
            obj, label, surrogate, {**merged, "checks": guess_checks(merged)}, "",
            [("", a)], True)[0], fn=obj)
    if reshaped:  # the exact inputs the findings came from
        record = _repro_record(candidate, obj, seed, sets, inline_limit)
    if flagged:  # dequantize=False gave uint8 codes: checked at True, the integer case said
        from gradsmith.checker.integer_output import flag_warning

        report.findings.append(flag_warning(flagged))
        report.sort()
    repro = None if report.passed else record
    if variants:
        inputs += "; also: " + "; ".join(v.change for v in variants)
    result = row(candidate, label, "pass" if report.passed else "fail", inputs=inputs,
                 elapsed=time.perf_counter() - started, report=report, repro=repro,
                 error="incomplete" if report.verdict == "INCOMPLETE" else None)
    if report.passed and report.codes("warning"):
        # --require may turn a warning into an error after the run (gradsmith._check_policy):
        # the row then fails and needs its exact inputs for a repro script
        result["_repro_if_failed"] = record
    if html and not report.passed:
        result["_jacobians"] = _jacobians(report)
    return result


# Findings that only say forward or backward raised (see _inputs' doubt).
_RAISED = frozenset({"backward-error", "forward-error"})


def _explained(doubt: str) -> frozenset[str]:
    """The findings a doubt explains: a complex gradient for a real input (discovery.doubt's
    complex-output case) is also what the grad-dtype-mismatch beside its backward-error says."""
    return _RAISED | {"grad-dtype-mismatch"} if complex_of_real(doubt) else _RAISED


class _Skip(Exception):
    """The candidate has no usable inputs; the message says how to register some."""


def _inputs(obj: Any, example_index: int | None, options: dict):
    from gradsmith._example import examples_of

    if example_index is None:
        found = synthesize(obj)
        if isinstance(found, NoInputs):
            raise _Skip(found.reason)
        return (found.args, None, dict(options), f"synthesised: {found.description}",
                found.variants, found.doubt, found.others, found.integer_flag)
    ex = examples_of(obj)[example_index]
    merged = {**ex.options, **options}
    if ex.reference is not None:  # judged against it (outputs and gradients), see checker
        merged.setdefault("reference", ex.reference)
    return ex.make_args(), ex.surrogate, merged, "registered example", (), "", None, ""


def _repro_record(candidate: Candidate, obj: Any, seed: int, sets: list, inline_limit) -> dict:
    """Seed, source and exact inputs of every input set, for --repro scripts and JSON."""
    names = parameter_names(obj)
    return {"seed": seed,
            "source": {"kind": candidate.ref.kind, "location": candidate.ref.location,
                       "attr": candidate.ref.attr},
            "sets": [{"label": label, "names": names,
                      "args": capture_args(tuple(args), inline_limit or 10 ** 12),
                      "ties": capture_ties(tuple(args))}
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
    (``None`` | ``import`` | ``crash`` | ``timeout`` | ``exception`` | ``incomplete``: no error,
    but a planned check did not establish its property), ``reason``, ``inputs``,
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
    return f"{type(exc).__name__}: {exception_text(exc)}{where}"


def _raised_in_user_code(exc: BaseException) -> bool:
    """True when the innermost frame is neither gradsmith's nor torch's."""
    import torch

    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return False
    if frames[-1].filename.startswith("<"):  # <frozen ...>, <string>: not the user's file
        return False
    where = os.path.abspath(frames[-1].filename)
    ours = (os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
            os.path.dirname(os.path.abspath(torch.__file__)))
    return not where.startswith(ours)
