"""A FAIL on guessed inputs must hold on another guess (private).

Zero-configuration inputs guess what the code does not state (a callable's map, an object, an
int's role, a secondary tensor's shape). A gradient error found on such inputs may be the
guess's: a nonlinear stand-in for a linear-map callable makes a correct adjoint "wrong". So
when the first input set's only errors compare backward with forward (:data:`COMPARED`),
:func:`confirmed` re-checks the Function on the other candidates synthesis knows for the
guessed arguments (:mod:`gradsmith.discovery.second_guess`: only those arguments change, and
forward and backward run there). If the errors hold on every candidate, or no candidate runs,
the FAIL stands and each error says which arguments were guesses. If some candidate passes,
nothing shows the Function is wrong: the errors become warnings and an ``unconfirmed-guess``
warning (the verdict is INCOMPLETE, never PASS) names the argument, the guess that failed,
the candidate that passed, and the fix. Only failing rows pay for it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

# Errors that compare backward with forward: what a wrong guess for an argument can produce
# (a gradient shaped from a stand-in's guessed shape attribute: grad-shape-mismatch).
COMPARED = frozenset({"gradient-mismatch", "backward-error", "nan-gradient",
                      "double-backward-mismatch", "grad-shape-mismatch"})
# Errors shown whatever the guessed values: a rerun of forward demonstrated them (a backward
# that writes into an input changes the next forward's output). They stand beside a
# compared error, which is still confirmed (corpus 13d's rotary embedding: its conjugate
# rotation is right for the duplicated-half caches users pass, not for random ones).
STANDING = frozenset({"input-mutated-in-backward"})
# Seconds of candidate checks after which no further candidate is tried.
_SECONDS = 5.0


def guess_checks(options: dict) -> list[str]:
    """The checks a candidate set runs: those that compare backward with forward (of those
    the options ask for), not the value checks a further input set re-runs."""
    chosen = options.get("checks")
    chosen = [chosen] if isinstance(chosen, str) else chosen
    return [c for c in ("structure", "gradients", "second_order")
            if chosen is None or c in chosen] or ["structure"]


def confirmed(report: Any, args: tuple, others: Callable[[tuple], list] | None,
              run: Callable[[tuple], Any], fn: Any = None) -> Any:
    """``report`` (the first set's errors confirmed on another guess, or said to be
    unconfirmed).

    Args:
        report: the merged report of a synthesised row.
        args: the first input set, as checked.
        others: the synthesis's candidate lister (``Synthesized.others``: the guessed names
            and the other candidates), or ``None``.
        run: checks the Function on an argument tuple (the value- and shape-dependent checks).
        fn: the Function; where a guessed callable is its forward, what backward alone shows
            decides (:mod:`gradsmith.checker.opaque_forward`).
    """
    from gradsmith.checker.unconfirmed import unconfirmed

    errors = [f for f in report.errors if f.code in COMPARED]  # the others hold on any guess
    if others is None or not errors or any(
            f.code not in COMPARED | STANDING or "input_set" in f.details for f in report.errors):
        return report  # not only backward-vs-forward errors of the first set
    try:
        names, guesses = others(args)
    except Exception:  # noqa: BLE001 - no other candidate: the FAIL stands
        return report
    started = time.perf_counter()
    for guess in guesses:
        if time.perf_counter() - started > _SECONDS:
            break  # a slow check: the FAIL stands rather than the row timing out
        try:
            other = run(guess.args)
        except Exception:  # noqa: BLE001 - did not run there: not a candidate that passed
            continue
        if other.passed and "gradients" in other.checks:
            for f in errors:
                f.severity = "warning"
                f.message = f"[on the guessed inputs] {f.message}"
            report.findings.append(unconfirmed(guess.changed, sorted({f.code for f in errors}),
                                                   guess.source))
            report.sort()
            return report
    if fn is not None and (alone := _backward_alone(report, fn, args, names)) is not None:
        return alone
    held = ("the error held on the other candidates tried: " + "; ".join(
        g.said for g in guesses) if guesses else f"no other candidate for "
            f"{'it' if len(names) == 1 else 'them'} runs forward and backward")
    for f in errors:
        if names:
            f.details["guessed"] = list(names)
            f.message += (f" (synthesised inputs where {', '.join(names)} "
                          f"{'was a guess' if len(names) == 1 else 'were guesses'}; {held})")
    return report



def _backward_alone(report: Any, fn: Any, args: tuple, names: list[str]) -> Any:
    """``report`` judged by backward alone where forward is a guessed callable: the errors
    stand with the asymmetry that shows them, or become warnings of an INCOMPLETE row; None
    where that does not apply (:mod:`gradsmith.checker.opaque_forward`)."""
    from gradsmith.checker.opaque_forward import judged
    from gradsmith.checker.report import Finding

    try:
        found = judged(fn, args, list(names))
    except Exception:  # noqa: BLE001 - not judged: the FAIL stands as before
        return None
    if found is None:
        return None
    symmetric, said = found
    if not symmetric:
        for f in report.errors:
            f.message += f" ({said})"
        return report
    codes = sorted({f.code for f in report.errors})
    for f in report.errors:
        f.severity = "warning"
        f.message = f"[on the guessed inputs] {f.message}"
    report.findings.append(Finding(
        "unconfirmed-guess", "warning",
        f"{', '.join(codes)} arose only on a guess: {said}. The error is not shown to be the "
        "Function's; the verdict is INCOMPLETE",
        "register an example with the real callable (@gradsmith.example) so that the check "
        "does not have to guess", "gradients", None,
        {"incomplete": True, "codes": codes, "changed": {}}))
    report.sort()
    return report
