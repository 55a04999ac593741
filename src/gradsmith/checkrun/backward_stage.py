"""Whether a task process was inside a Function's backward when it died (private).

A C++ or CUDA kernel that writes or reads out of bounds kills the process (SIGSEGV, SIGABRT
from a heap check) instead of raising; the row then only knows the process ended. Whether the
process died *inside* backward is what separates demonstrated harm from a crash gradsmith
cannot place: the task streams a small message when the autograd engine enters and leaves a
custom Function's backward (:func:`tracking`), the worker pool merges it into the task's last
progress snapshot (``"_merge"``), and :func:`crash_in_backward` reads it from the row's
progress after the crash. Pipe writes reach the parent even when the process dies right after.

Only the task process of an isolated run is tracked: in-process runs die with their caller.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from gradsmith.isolation.tasklog import HEAP_CHECK as _HEAP_CHECK

#: The progress key: ``{"function": name, "done": bool}`` of the last backward entered.
KEY = "in_backward"


@contextmanager
def tracking(on_progress: Callable[[dict], None]) -> Iterator[None]:
    """Stream ``{KEY: {"function": name, "done": False}}`` as the engine enters a custom
    Function's backward and ``... "done": True`` as it leaves, for every backward the task
    runs (the probes of input synthesis and the checks alike).

    The engine calls ``BackwardCFunction.apply`` (or ``apply_boxed``) for every custom
    Function's backward node, so wrapping those two, for this process only, sees every
    backward without touching the user's class.
    """
    from torch.autograd.function import BackwardCFunction

    originals = {name: BackwardCFunction.__dict__[name] for name in ("apply", "apply_boxed")
                 if name in BackwardCFunction.__dict__}

    def wrap(original: Callable) -> Callable:
        def entered(self, *args):  # noqa: ANN001, ANN202 - the engine's own signature
            name = getattr(getattr(self, "_forward_cls", None), "__qualname__", "?")
            on_progress({"_merge": True, KEY: {"function": name, "done": False}})
            result = original(self, *args)
            on_progress({"_merge": True, KEY: {"function": name, "done": True}})
            return result
        return entered

    for name, original in originals.items():
        setattr(BackwardCFunction, name, wrap(original))
    try:
        yield
    finally:
        for name, original in originals.items():
            setattr(BackwardCFunction, name, original)


def crash_in_backward(progress: dict | None) -> str | None:
    """The qualified name of the Function whose backward was running when the task died, from
    its last progress (``None``: it died elsewhere, or nothing was tracked)."""
    stage = (progress or {}).get(KEY)
    if isinstance(stage, dict) and stage.get("done") is False:
        return str(stage.get("function"))
    return None


def died(kind: str, reason: str | None) -> bool:
    """Whether a task that ended without a result died: a crash, or a timeout whose last
    output has glibc's heap check aborting it (``double free or corruption``): a crash handler
    a library installed (cling's prints a debugger backtrace) can then hang in the corrupted
    heap (gradsmith's worker ends it once its output goes quiet), but the process was
    already dying."""
    return kind == "crash" or (kind == "timeout" and bool(_HEAP_CHECK.search(reason or "")))


def backward_returned(progress: dict | None) -> str | None:
    """The qualified name of the Function whose backward last returned before the task died
    outside any backward (``None``: no backward had run, or one was running)."""
    stage = (progress or {}).get(KEY)
    if isinstance(stage, dict) and stage.get("done") is True:
        return str(stage.get("function"))
    return None


def mark_synthesis_crash(out: dict, function: str) -> None:
    """Make ``out`` INCOMPLETE: the task died while gradsmith was still trying candidate inputs,
    outside any backward but after ``function``'s backward had returned on them.

    Memory a kernel corrupted on inputs outside its contract (a matrix of the wrong size in a
    compiled extension) shows at a later allocation, wherever it happens: nothing places the
    crash in the Function on inputs that fit, so it is not demonstrated harm.
    """
    finding = {
        "code": "synthesis-crash", "severity": "warning",
        "message": f"the process died while gradsmith was trying candidate inputs (not shown to "
                   f"fit the Function's contract), after {function}.backward had returned on "
                   f"them: {_how(out)}",
        "hint": "register inputs that fit (@gradsmith.example); a kernel that does not check "
                "its operands' sizes corrupts memory on those that do not fit",
        "check": "gradients", "input": None,
        "details": {"function": function, "incomplete": True}}
    _add(out, finding, incomplete=True)


def mark_backward_crash(out: dict, function: str, *, demonstrated: bool) -> None:
    """Make ``out``, the row of a task that died inside ``function``'s backward, say so.

    Args:
        out: the crash row (verdict ``fail``, error ``crash``), with the partial report of the
            checks that finished when there is one.
        function: the Function whose backward was running.
        demonstrated: the inputs were the check's own (synthesis had finished and forward had
            accepted them): the crash is harm a caller meets, an error. Otherwise gradsmith was
            still trying candidate inputs not shown to fit the contract: a warning, and the row
            is INCOMPLETE.
    """
    where = ("on the inputs forward accepted and the checks used" if demonstrated else
             "on candidate inputs gradsmith was still trying (not shown to fit the Function's "
             "contract)")
    finding = {
        "code": "backward-crash", "severity": "error" if demonstrated else "warning",
        "message": f"the process died inside {function}.backward {where}: "
                   f"{_how(out)}",
        "hint": "check the shapes, strides and argument order backward hands its kernels"
                + ("" if demonstrated else "; register inputs that fit (@gradsmith.example) "
                   "to settle it"),
        "check": "gradients", "input": None,
        "details": {"function": function, **({} if demonstrated else {"incomplete": True})}}
    _add(out, finding, incomplete=not demonstrated)


def _how(out: dict) -> str:
    reason = out["reason"] or ""
    heap = _HEAP_CHECK.search(reason)
    if out.get("error") == "timeout" and heap:
        return (f"glibc's heap check reported {heap.group(0)!r} and aborted it (a crash handler "
                "then hung in the corrupted heap and was killed)")
    return reason.split("; its last output")[0]


def _add(out: dict, finding: dict, *, incomplete: bool) -> None:
    report = out.get("report") or {
        "name": out["name"], "passed": False, "elapsed": 0.0, "checks": list(out.get("checks")
                                                                           or []),
        "skipped": {}, "saved_bytes": None, "findings": [], "jacobians": {},
        "unfinished": "gradients"}
    report["findings"] = [*report["findings"], finding]
    line = (f"  {finding['severity'].upper()} {finding['code']}: {finding['message']}\n"
            f"    fix: {finding['hint']}")
    out.update(error="incomplete" if incomplete else None, report=report,
               text="\n".join(filter(None, [out.get("text"), line])),
               _text_brief="\n".join(filter(None, [out.get("_text_brief"), line])))
