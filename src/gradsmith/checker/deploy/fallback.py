"""The first forward (and one backward) of a check, and the dtype the check then runs in.

Checks run in float64 when the Function allows it. A Function that cannot run there is checked
where it can: in the user's dtype when forward rejects float64 (``float64-unsupported``, as
before), and in float32 when it *crashes* in float64 although the user passed float64 (or the
inputs were synthesised in float64), or when only its backward crashes there. The latter is
what float32 internals do (a running statistic created with ``dtype=torch.float32``, mixed with
float64 inputs in a matmul): ``float64-crash`` says so, and the Function is still checked in
the dtype where it runs, so the user learns whether it is right there. Triton kernels that a GPU
compiler rejects for float64 (a float32 accumulator that float64 loads make float64: Triton's
``CompilationError``; its interpreter accepts them) are checked in float32 the same way, with an
info finding that names the compiler's reason. Once forward has raised in float64, it is never
called there again: a backward that then raises in float32 too is reported there. A Function
whose float64 run is garbage while float32 is what it computes in (a library reading the
tensor's memory as float32) is checked in float32 too (:mod:`gradsmith.checker.float32_contract`).
"""

from __future__ import annotations

from typing import Any

import torch

from gradsmith.checker import float32_contract, reported
from gradsmith.checker.inputs import flatten_outputs
from gradsmith.checker.report import Finding
from gradsmith.checker.session import Session, forward_error


class _Failed(Exception):  # noqa: N818 - carries which stage failed
    def __init__(self, stage: str, exc: BaseException) -> None:
        super().__init__(str(exc))
        self.stage, self.exc = stage, exc


def first_forward(session: Session) -> Any | None:
    """Run forward (+ one backward) in float64, falling back; None after a forward error."""
    subject, report = session.subject, session.report
    if reported.known("float32-contract", None) and subject.dtype == torch.float64:
        # an earlier input set showed float64 outside the contract: float32 at once (the
        # float64 run and the comparison cost seconds a set with interpreted kernels)
        try:
            _attempt(session, torch.float32)
        except _Failed:
            pass  # not on these inputs: decide afresh
        else:
            _settle(subject, torch.float32)
            return subject.call([x.clone() for x in subject.fresh_leaves()])
    try:
        out = _attempt(session, torch.float64)
    except _Failed as f64:
        failed64 = f64
    else:
        if (why := float32_contract.broken(subject, out)) is None:
            return out
        report.findings.append(float32_contract.finding(why))  # gtn reads memory as float32
        _settle(subject, torch.float32)
        return subject.call([x.clone() for x in subject.fresh_leaves()])
    user_dtypes = {t.dtype for t in subject.args.originals}
    candidates: list[torch.dtype | None] = []
    if user_dtypes != {torch.float64}:
        candidates.append(None)
    candidates.append(torch.float32)
    last: _Failed = failed64
    ran: list[torch.dtype | None] = []  # dtypes whose forward ran (their backward raised)
    for dtype in candidates:
        try:
            out = _attempt(session, dtype)
        except _Failed as err:
            last = err
            ran += [dtype] if err.stage == "backward" else []
            continue
        report.findings.append(_finding(failed64, dtype, user_dtypes))
        _settle(subject, dtype)
        return out
    if failed64.stage == "backward":
        subject.dtype = torch.float64  # the eager checks report the backward error
        return subject.call([x.clone() for x in subject.fresh_leaves()])
    if ran:
        # float64's forward raised (e.g. a Triton kernel that does not compile for float64
        # natively): never call it there again; the eager checks report the backward error
        # in the dtype where forward runs
        report.findings.append(_finding(failed64, ran[0], user_dtypes))
        _settle(subject, ran[0])
        try:
            return subject.call([x.clone() for x in subject.fresh_leaves()])
        except Exception as exc:  # noqa: BLE001 - user code
            last = _Failed("forward", exc)
    report.findings.append(forward_error(last.exc, "setup", subject.target.function_cls).finding)
    return None


def _settle(subject: Any, dtype: torch.dtype | None) -> None:
    """Every later check runs in ``dtype`` (None: the user's)."""
    if dtype is not None:  # float32 it is: the "user's dtype" of every later check
        subject.args.recast(dtype)
    subject.dtype = None


def _attempt(session: Session, dtype: torch.dtype | None) -> Any:
    subject = session.subject
    subject.dtype = dtype
    leaves = subject.fresh_leaves()
    try:
        out = subject.call([x.clone() for x in leaves])
    except Exception as exc:  # noqa: BLE001
        raise _Failed("forward", exc) from None
    outs = [o for o in flatten_outputs(out) if o is not None and o.is_floating_point()
            and o.requires_grad]
    if outs:
        try:
            torch.autograd.grad(outs, leaves, [torch.ones_like(o) for o in outs],
                                allow_unused=True)
        except Exception as exc:  # noqa: BLE001
            raise _Failed("backward", exc) from None
        # Run forward again: some forwards keep state per graph (and the graph above is
        # consumed); the caller discovers outputs on an untouched one.
        out = subject.call([x.clone() for x in subject.fresh_leaves()])
    return out


def _finding(failed: _Failed, dtype: torch.dtype | None, user: set[torch.dtype]) -> Finding:
    exc = failed.exc
    text = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
    where = "the user's dtype" if dtype is None else str(dtype).removeprefix("torch.")
    if failed.stage == "forward" and (why := uncompiled(exc)) is not None:
        if dtype is None:  # the user's: name it
            where = "/".join(sorted(str(d).removeprefix("torch.") for d in user
                                    if d.is_floating_point)) + " (the input dtype)"
        return Finding(
            "float64-unsupported", "info",
            f"its Triton kernels do not compile for float64 ({why}): checked in {where}, "
            "the precision the kernels are written for, with finite-difference steps and "
            "tolerances calibrated to it (Triton's interpreter accepts float64; a GPU "
            "compiler rejects a float32 accumulator that float64 loads turn into float64)",
            "nothing to fix if float64 is not meant to be supported; else start accumulators "
            "in the loaded dtype (tl.zeros(..., dtype=x.dtype)) or cast loads to tl.float32",
            "setup", details={"stage": "compile", "exception": type(exc).__name__,
                              "checked_in": where})
    if failed.stage == "forward" and dtype is None:
        return Finding(
            "float64-unsupported", "info",
            f"forward fails in float64 ({text}); checked in the input dtype with step and "
            "tolerances scaled to its precision",
            "let forward follow its input dtype to get the most sensitive check", "setup")
    return Finding(
        "float64-crash", "warning",
        f"the {failed.stage} crashes in float64 ({text}) but runs in {where}: checked in "
        f"{where} instead (looser tolerances). Likely float32 internals: a tensor created "
        "with a hard-coded dtype=torch.float32 meets float64 inputs",
        "create internal tensors with the input's dtype (torch.zeros_like(x), dtype=x.dtype, "
        "or cast saved statistics back with .to(grad.dtype)); float64 is where gradients can "
        "be checked most precisely", "setup",
        details={"stage": failed.stage, "exception": type(exc).__name__,
                 "checked_in": where})


def uncompiled(exc: BaseException) -> str | None:
    """Why Triton could not compile a kernel (its ``CompilationError``'s own message, e.g.
    "Loop-carried variable acc has initial type fp32 but is re-assigned to fp64"), or None
    when ``exc`` is no Triton compilation error. Known by its class's module, so that code
    without Triton never imports it."""
    for cls in type(exc).__mro__:
        if cls.__name__ == "CompilationError" and cls.__module__.startswith("triton"):
            text = str(getattr(exc, "error_message", None) or "").strip() or \
                (str(exc).strip().splitlines() or [""])[-1]
            return f"Triton CompilationError: {text[:200]}"
    return None
