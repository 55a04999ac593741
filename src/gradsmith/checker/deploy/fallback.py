"""The first forward (and one backward) of a check, and the dtype the check then runs in.

Checks run in float64 when the Function allows it. A Function that cannot run there is checked
where it can: in the user's dtype when forward rejects float64 (``float64-unsupported``, as
before), and in float32 when it *crashes* in float64 although the user passed float64 (or the
inputs were synthesised in float64), or when only its backward crashes there. The latter is
what float32 internals do (a running statistic created with ``dtype=torch.float32``, mixed with
float64 inputs in a matmul): ``float64-crash`` says so, and the Function is still checked in
the dtype where it runs, so the user learns whether it is right there.
"""

from __future__ import annotations

from typing import Any

import torch

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
    try:
        return _attempt(session, torch.float64)
    except _Failed as f64:
        failed64 = f64
    user_dtypes = {t.dtype for t in subject.args.originals}
    candidates: list[torch.dtype | None] = []
    if user_dtypes != {torch.float64}:
        candidates.append(None)
    candidates.append(torch.float32)
    last: _Failed = failed64
    for dtype in candidates:
        try:
            out = _attempt(session, dtype)
        except _Failed as err:
            last = err
            continue
        report.findings.append(_finding(failed64, dtype))
        if dtype is not None:  # float32 it is: the "user's dtype" of every later check
            subject.args.recast(dtype)
            subject.dtype = None
        return out
    if last.stage == "backward" or failed64.stage == "backward":
        subject.dtype = torch.float64  # the eager checks report the backward error
        return subject.call([x.clone() for x in subject.fresh_leaves()])
    report.findings.append(forward_error(last.exc, "setup", subject.target.function_cls).finding)
    return None


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


def _finding(failed: _Failed, dtype: torch.dtype | None) -> Finding:
    exc = failed.exc
    text = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
    where = "the user's dtype" if dtype is None else str(dtype).removeprefix("torch.")
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
