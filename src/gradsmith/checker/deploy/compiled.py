"""``compile``: ``torch.compile(fullgraph=True)`` of the Function gives eager's outputs and
gradients; graph breaks are listed with Dynamo's reason and the user line that caused them.

The default backend is ``aot_eager`` (Dynamo + AOTAutograd, the part that traces forward and
backward; it costs ~0.05 s per small Function on two cores). ``compile_backend="inductor"``
also generates code (seconds per Function): use it on a few Functions, not a whole catalog.
Dynamo is reset before and after each Function so no compiled frame or recompile counter of
one Function can decide another's verdict.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import torch

from gradsmith.checker.deploy._common import (
    comparable_only,
    describe,
    evaluate,
    first_line,
    importable,
    mismatches,
    quiet_dynamo,
    reference,
    root_cause,
    user_frame,
    user_frame_of,
)
from gradsmith.checker.report import Finding
from gradsmith.checker.session import Session, Skip

NAME = "compile"
BACKENDS = ("aot_eager", "inductor", "eager")
MAX_BREAKS = 3


def tolerance(dtype: torch.dtype) -> float:
    """Compiled vs eager: rounding may change order, never more than sqrt(eps) relative."""
    return torch.finfo(dtype).eps ** 0.5


#: Dynamo graph-break types that are torch's own limits, not the Function's fault.
TORCH_LIMITS = {
    "Unsupported custom jvp": "Functions that define jvp",
    "Unsupported custom vjp": "Functions that define vjp",
}
#: Findings of the custom_op check that already explain why compile cannot trace the op.
EXPLAINED_BY = ("custom-op-no-fake", "custom-op-fake-mismatch")


def run(session: Session) -> list[Finding]:
    return comparable_only(session, _run(session), NAME)


def _run(session: Session) -> list[Finding]:
    explained = [f.code for f in session.report.findings if f.code in EXPLAINED_BY]
    if explained:
        raise Skip(f"the custom op's fake kernel cannot trace it ({explained[0]})")
    backend = session.options.extra.get("compile_backend", "aot_eager")
    want = reference(session)
    with quiet_dynamo(), _inductor_random(backend), importable(session.function_cls):
        try:
            got = evaluate(session, torch.compile(session.subject.target.call, backend=backend,
                                                  fullgraph=True))
        except Exception as exc:  # noqa: BLE001 - any Dynamo failure is the finding
            return _not_one_graph(session, exc, backend)
    return _compare(session, got, want, backend, fullgraph=True)


def _not_one_graph(session: Session, exc: BaseException, backend: str) -> list[Finding]:
    """fullgraph failed: name the graph breaks (Dynamo's exception, plus the further ones the
    compile with graph breaks allowed records), then compare that compile's results with
    eager."""
    classmethods = _classmethods(session.function_cls)
    if classmethods:
        # Dynamo's message ("failed to bind arguments") does not say why; and it runs such a
        # Function eagerly between graphs, so compiling again without fullgraph tells nothing.
        return [_classmethod_finding(classmethods, exc)]
    first = _graph_break(exc)
    if first is not None and _host_library(first):
        # A break inside NumPy or SciPy: the Function computes on host arrays there, and a
        # compile with breaks allowed would trace the library's own Python, frame by frame
        # (11.9 s for scipy.linalg.logm), to say the same: stop at the first break.
        return [_break_finding(*first)]
    # One trace with graph breaks allowed both lists the breaks (what torch._dynamo.explain
    # records, from the same Dynamo state) and gives the results to compare: a separate
    # explain would trace the whole Function once more (seconds for unrolled loops).
    explainer = _explainer(backend)
    got, failed = None, None
    with quiet_dynamo(), _inductor_random(backend), importable(session.function_cls):
        try:
            got = evaluate(session, torch.compile(session.subject.target.call,
                                                  backend=explainer or backend))
        except Exception as exc2:  # noqa: BLE001
            failed = exc2
    breaks = _breaks(explainer) if first is not None else []
    if first is not None and all(first[1] != where for _, where in breaks):
        breaks.insert(0, first)
    findings = [_break_finding(reason, where) for reason, where in breaks[:MAX_BREAKS]]
    if not findings:
        where = user_frame_of(exc)
        findings.append(Finding(
            "compile-error", "warning",
            f"torch.compile(fullgraph=True, backend={backend!r}) raised "
            f"{first_line(root_cause(exc))}{_at(where)}",
            "run torch.compile(fn, fullgraph=True) on the example by hand to see Dynamo's full "
            "message; keep forward and backward to torch operations on tensors (no .item(), "
            ".tolist(), numpy or data-dependent Python branches)", NAME,
            details={"exception": type(exc).__name__, "where": _where(where)}))
    if failed is not None:
        internal = "Internal" in type(failed).__name__
        findings.append(Finding(
            "compile-error", "warning",
            f"torch.compile (with graph breaks allowed) raised "
            f"{first_line(root_cause(failed))}{_at(user_frame_of(failed))}"
            + (" (Dynamo failed internally: a torch bug, but the Function cannot be "
               "compiled until it is fixed)" if internal else ""),
            "the Function cannot be used inside a compiled model; see Dynamo's message, "
            "or keep it out of the compiled region with torch.compiler.disable",
            NAME, details={"exception": type(failed).__name__}))
        return findings
    return findings + _compare(session, got, reference(session), backend, fullgraph=False)


def _compare(session: Session, got: Any, want: Any, backend: str,
             fullgraph: bool) -> list[Finding]:
    dtype = want.outs[0].dtype if want.outs else torch.float64
    bad = mismatches(session, got, want, tolerance(dtype))
    if not bad:
        return []
    mode = "fullgraph=True" if fullgraph else "with graph breaks"
    hint = ("something in forward or backward depends on Python state that Dynamo captured "
            "once (globals, torch.compiler.is_compiling() branches, object identity); keep it "
            "a function of its tensor inputs")
    if _marks_dirty(session):
        hint = ("forward modifies its input in place (ctx.mark_dirty), which torch.compile "
                f"(torch {torch.__version__.split('+')[0]}) differentiates wrongly: return a "
                "new tensor instead (out-of-place), or keep the Function out of compiled "
                "regions (torch.compiler.disable)")
    return [Finding(
        "compile-mismatch", "error",
        f"torch.compile({mode}, backend={backend!r}) gives different results than eager: "
        f"{describe(bad)}", hint, NAME, bad[0][1],
        details={"mismatches": [list(b) for b in bad], "backend": backend})]


def _marks_dirty(session: Session) -> bool:
    cls = session.function_cls
    if cls is None:
        return False
    import inspect

    try:
        return "mark_dirty" in inspect.getsource(cls)
    except (OSError, TypeError):
        return False


def _explainer(backend: str) -> Any:
    """``backend`` wrapped to record each graph Dynamo compiles and why the one before it
    ended (``torch._dynamo.backends.debugging.ExplainWithBackend``, what ``explain`` records);
    None where this torch has no such wrapper (the compile then lists the first break only)."""
    try:
        from torch._dynamo.backends.debugging import ExplainWithBackend

        return ExplainWithBackend(backend)
    except Exception:  # noqa: BLE001 - a torch without it: the first break is still named
        return None


def _breaks(explainer: Any) -> list[tuple[str, tuple[str, int, str] | None]]:
    """Dynamo's graph-break reasons with the user line of each, as ``explainer`` recorded
    them while the Function compiled with graph breaks allowed."""
    seen, found = set(), []
    for b in getattr(explainer, "break_reasons", None) or []:
        reason = _short_reason(str(getattr(b, "reason", "")))
        if not reason:
            continue
        where = user_frame(list(getattr(b, "user_stack", []) or []))
        key = (reason, where)
        if key not in seen:
            seen.add(key)
            found.append(key)
    return found[:MAX_BREAKS]


def _graph_break(exc: BaseException) -> tuple[str, tuple[str, int, str] | None] | None:
    """``(reason, user frame)`` when fullgraph failed on a graph break (Dynamo's Unsupported
    or a data-dependent guard), else None."""
    from torch._dynamo.exc import Unsupported, UserError

    cause = root_cause(exc)
    if not isinstance(cause, (Unsupported, UserError)):
        return None
    reason = _short_reason(str(cause))
    return (reason, user_frame_of(cause)) if reason else None


#: Array libraries that compute on host arrays: Dynamo breaks inside them, never compiles them.
_HOST_LIBRARIES = {"numpy", "scipy"}


def _host_library(found: tuple[str, tuple[str, int, str] | None]) -> bool:
    """Whether a graph break is inside NumPy or SciPy: its frame lies in one of their
    packages (``scipy/linalg/_matfuncs.py``), or Dynamo's reason is an ndarray it cannot
    trace."""
    reason, where = found
    if "ndarray" in reason or "numpy function" in reason:
        return True
    if where is None:
        return False
    folder = Path(where[0]).parent
    while (folder / "__init__.py").exists() and (folder.parent / "__init__.py").exists():
        folder = folder.parent  # up to the top-level package
    return (folder / "__init__.py").exists() and folder.name in _HOST_LIBRARIES


def _short_reason(reason: str) -> str:
    lines = [ln.strip() for ln in reason.strip().splitlines() if ln.strip()]
    keep = [ln for ln in lines if not ln.startswith(("Developer debug context", "For more"))]
    return " ".join(keep[:2])[:400]


def _classmethods(cls: type | None) -> list[str]:
    """forward/backward/setup_context defined as @classmethod (legal in eager)."""
    if cls is None:
        return []
    return [m for m in ("forward", "backward", "setup_context")
            if isinstance(inspect.getattr_static(cls, m, None), classmethod)]


def _classmethod_finding(methods: list[str], exc: BaseException) -> Finding:
    return Finding(
        "compile-graph-break", "warning",
        f"torch.compile(fullgraph=True) fails: {', '.join(methods)} "
        f"{'is a' if len(methods) == 1 else 'are'} @classmethod, and Dynamo (torch "
        f"{torch.__version__.split('+')[0]}) traces an autograd.Function only with "
        f"@staticmethod ones ({first_line(root_cause(exc), 120)})",
        "declare them @staticmethod (autograd never uses cls; refer to the class by name "
        "where cls was used)", NAME,
        details={"reason": "classmethod", "methods": methods})


def _break_finding(reason: str, where: tuple[str, int, str] | None) -> Finding:
    limit = next((what for gb, what in TORCH_LIMITS.items() if reason.startswith(gb)), None)
    if limit is not None:
        return Finding(
            "compile-unsupported-by-torch", "info",
            f"Dynamo (torch {torch.__version__.split('+')[0]}) does not trace {limit}: "
            "torch.compile(fullgraph=True) refuses the Function and a compiled model runs it "
            "eagerly between graphs (torch's own limit; results compared below)",
            "nothing to fix in the Function; drop the jvp/vjp method only if you need one "
            "compiled graph", NAME, details={"reason": reason, "limitation": True})
    return Finding(
        "compile-graph-break", "warning",
        f"torch.compile(fullgraph=True) fails: Dynamo graph-breaks{_at(where)}: {reason}",
        "make that line a tensor operation (torch.where instead of a Python branch on a "
        "tensor, keep scalars as 0-dim tensors instead of .item()); a graph break splits the "
        "compiled model and fullgraph=True / torch.export refuse it", NAME,
        details={"reason": reason, "where": _where(where)})


def _at(where: tuple[str, int, str] | None) -> str:
    if where is None:
        return ""
    file, line, source = where
    code = f" `{source.strip()}`" if source and source.strip() else ""
    return f" at {file}:{line}{code}"


def _where(where: tuple[str, int, str] | None) -> dict | None:
    if where is None:
        return None
    return {"file": where[0], "line": where[1], "source": where[2]}


class _inductor_random:
    """Inductor has its own RNG unless told to fall back to eager's: needed to compare random
    forwards sample for sample. A no-op for the other backends."""

    def __init__(self, backend: str) -> None:
        self.backend = backend

    def __enter__(self) -> None:
        self._patch = None
        if self.backend != "inductor":
            return
        try:
            import torch._inductor.config as config
        except Exception:  # noqa: BLE001 - no inductor: nothing to patch
            return
        self._patch = config.patch(fallback_random=True)
        self._patch.__enter__()

    def __exit__(self, *exc: object) -> None:
        if self._patch is not None:
            self._patch.__exit__(*exc)
