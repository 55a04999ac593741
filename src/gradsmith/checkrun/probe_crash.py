"""A task that died in forward while synthesis was still trying candidate inputs (private).

Input synthesis calls forward on candidate inputs it has not shown to fit the Function's
contract. A compiled kernel that does not check its operands kills the process on those that
do not fit (corpus 13's phytorch ``Roots``: its C++ closed forms take complex coefficients and
segfault on the real ones tried first) before any backward has run. Nothing places that crash
on inputs that fit, so it is not demonstrated harm: the row is INCOMPLETE, as a crash after a
backward returned on candidate inputs is (:func:`~gradsmith.checkrun.backward_stage.\
mark_synthesis_crash`). A crash on a registered example's inputs, or once synthesis has
finished, stays an error.
"""

from __future__ import annotations

from gradsmith.checkrun.backward_stage import KEY, _add

#: The progress key a task merges once its code is imported; the repro record, streamed once its
#: inputs are known, replaces the snapshot that holds it.
PROBING = "finding_inputs"


def died_probing(progress: dict | None, example_index: int | None) -> bool:
    """The task was past its import, synthesising inputs (no registered example, no inputs
    known yet), and no custom backward had been entered when it died."""
    progress = progress or {}
    return example_index is None and progress.get(PROBING) is True and \
        "repro" not in progress and KEY not in progress


def mark_probe_crash(out: dict) -> None:
    """Make ``out``, the crash row of such a task, INCOMPLETE with a warning that says so."""
    reason = (out.get("reason") or "").split("; its last output")[0]
    finding = {
        "code": "synthesis-crash", "severity": "warning",
        "message": "the process died while gradsmith was trying candidate inputs (not shown to "
                   f"fit the Function's contract), before any backward had run: {reason}",
        "hint": "register inputs that fit (@gradsmith.example); a compiled kernel that does "
                "not check its operands' dtype or sizes crashes on those that do not fit",
        "check": "gradients", "input": None, "details": {"incomplete": True}}
    _add(out, finding, incomplete=True)
