"""Check one candidate on each of its input sets and merge what they find (private).

The first set is checked in full; each further set (a synthesised variant: other values, shapes,
a non-contiguous index, ``3 * randn``) re-runs the checks that depend on the values and shapes,
and adds the findings the first set did not have, each saying on which inputs it arose. A
synthesised set whose guessed parameter shape backward reduces is checked again on the layout
backward returns (:func:`gradsmith.checker.layout.on_own_layout`). A set whose option the code
itself refuses (``assert ctx.reduce_bias``) is left out with an info finding
(:mod:`gradsmith.checker.refused`); one whose flipped option makes forward hard while backward
keeps the first set's verified gradient is a straight-through mode, a warning
(:mod:`gradsmith.checker.hard_option`). The verifier is imported lazily: the command line process
never imports torch.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gradsmith.discovery import parameter_names

# Variant input sets re-run the checks that depend on the values and shapes; the rest
# (hygiene, vmap, randomness...) would only repeat the first set's findings at a higher cost.
VARIANT_CHECKS = ("structure", "mutation", "gradients", "surrogate", "second_order")


def check_sets(obj: Any, label: str, surrogate: Any, options: dict, inputs: str,
               sets: list[tuple[str, tuple]], synthesised: bool
               ) -> tuple[Any, str, list[tuple[str, tuple]], dict]:
    """Check ``obj`` on each ``(description, args)`` of ``sets`` (the first in full).

    Returns:
        ``(report, inputs, sets, reshaped)``: the merged report; the first set's description,
        saying where a parameter was reshaped; the sets as checked; the first reshaped
        parameters' shapes (empty when none was).
    """
    from gradsmith.checker import check, reported
    from gradsmith.checker.fixed_sizes import fixed_size
    from gradsmith.checker.hard_option import hard_option
    from gradsmith.checker.in_place_option import asked_in_place
    from gradsmith.checker.layout import on_own_layout
    from gradsmith.checker.refused import refused

    names = parameter_names(obj)

    def checked(args: tuple, opts: dict, known=frozenset()) -> tuple[tuple, Any, dict]:
        report = check(obj, *args, surrogate=surrogate, name=label, **opts)
        if not synthesised or report.passed:  # registered examples are the user's shapes
            return args, report, {}
        return on_own_layout(args, names, report, lambda a: check(
            obj, *a, surrogate=surrogate, name=label, **opts), known)

    args, report, reshaped = checked(sets[0][1], options)
    if reshaped:
        inputs += f" (then {_said(reshaped)}: the layout backward is written for)"
    done, known = [(inputs, args)], frozenset(reshaped)
    for index, (change, variant) in enumerate(sets[1:], start=1):
        # what the merge keeps of this set is only what is new: no explaining the rest again
        with reported.already((f.code, f.input) for f in report.findings):
            set_args, other, changed = checked(
                variant, {**options, "checks": variant_checks(options)}, known)
        if synthesised:  # q.view(-1, 4, 1) in backward: written for the first set's size
            fixed_size(other, args, set_args)
        if synthesised and (note := refused(obj, args, set_args, other)) is not None:
            # `assert ctx.reduce_bias`: the code refuses this set's option; nothing on it ran
            other = replace(other, findings=[note], checks=[])
        elif synthesised and asked_in_place(obj, args, set_args, report, other):
            pass  # in_place=True: writing into x and grad_output is what the option asks for
        elif synthesised and (note := hard_option(obj, args, set_args, report, other)):
            # forward_hard_map=True: backward keeps the first set's verified gradient
            other = replace(other, findings=[f for f in other.findings if not f.is_error]
                            + [note])
        change += f", then {_said(changed)}" if changed else ""
        merge(report, index, change, other)
        done.append((change, set_args))
        reshaped = reshaped or changed
    return report, inputs, done, reshaped


def _said(shapes: dict) -> str:
    return ", ".join(f"{n} {s}" for n, s in shapes.items())


def variant_checks(options: dict) -> list[str]:
    """The checks a further input set re-runs (of those the options ask for)."""
    chosen = options.get("checks")
    chosen = [chosen] if isinstance(chosen, str) else chosen
    return [c for c in VARIANT_CHECKS if chosen is None or c in chosen] or ["structure"]


def _layout_only(change: str, finding: Any) -> str:
    """An error first met where only an index's layout changed: the sets before (contiguous
    index) held, so say the result depends on that index's memory layout."""
    if not (finding.is_error and change.startswith("non-contiguous index: ")):
        return ""
    names = change.removeprefix("non-contiguous index: ")
    return (f" (only on the set where {names} is non-contiguous; the sets with {names} "
            f"contiguous held: likely {names} is read without its stride, e.g. by a kernel "
            "that loads `ptr + row`, and so reads other values here)")


def merge(report: Any, index: int, change: str, other: Any) -> None:
    """Add a variant's new findings to the first report, saying on which inputs they arose."""
    report.merge_exercised(other)
    known = {(f.code, f.input) for f in report.findings}
    for f in other.findings:
        if (f.code, f.input) in known or f.code in ("constant-input", "user-warning"):
            continue
        f.details["input_set"] = index
        f.details["inputs"] = change
        f.message = f"[inputs: {change}] {f.message}{_layout_only(change, f)}"
        report.findings.append(f)
    report.elapsed += other.elapsed
    report.add_timings(other)
    report.sort()
