"""Second order: a backward whose derivative autograd does not fully see.

The policy (docs/check.md, "second_order"): second order runs only once first order holds
(it is skipped on any first-order error). A backward whose value is right near the point
and whose graph records all its dependence on the inputs has, automatically, the right
derivative. So a double-backward mismatch after verified first order always means autograd
does not see part of backward's dependence on an input (values computed in forward,
``.detach()``, numpy, a compiled kernel). Autograd's derivative of backward's result is then

* exactly 0 for an input on every direction tried ("zero": it sees none of it): double
  backward silently returns 0 for that input; or
* non-zero and different ("partial": it sees some, e.g. swish saving ``sigmoid(x)`` and
  ``x``, or ``3 * g * x * x.detach()`` for ``x ** 3``): double backward returns only part of
  the second derivative.

Both harm only code that differentiates twice (gradient penalties, MAML, Hessian-vector
products), like a Function that breaks under ``torch.compile`` harms only those who compile:
one ``double-backward-unsupported`` warning per Function naming both groups, an error where
the project requires ``second-order``.
"""

from __future__ import annotations

import torch

from gradsmith.checker.problem import Problem
from gradsmith.checker.report import Finding
from gradsmith.checker.session import Session

CODE = "double-backward-unsupported"
#: The comparison's per-input finding that :func:`split` folds into :data:`CODE`.
MISMATCH = "double-backward-mismatch"
#: What makes a ``double-backward-unsupported`` warning fail: the requirable name.
REQUIRED_AS = "second-order"
#: Appended to the hint of a second-order warning: what makes it fail.
REQUIRE_HINT = (f"; `--require {REQUIRED_AS}` (or require = [\"{REQUIRED_AS}\"] in "
                "[tool.gradsmith.check]) makes this fail")
_FIRST_ORDER = ("gradients", "surrogate", "reference", "approximate")


def classify(grads: list[list[torch.Tensor]], problem: Problem,
             findings: list[Finding]) -> tuple[list[str], list[str]]:
    """The inputs with a double-backward mismatch, as (zero, partial).

    Args:
        grads: autograd's derivative of backward's result, one list per direction tried,
            one tensor per input of ``problem`` (the comparison's analytic side).
        problem: the second-order problem ``(x..., v...) -> J(x)^T v``.
        findings: the second-order findings; a ``double-backward-mismatch`` on an input
            says finite differences differ from autograd beyond tolerance there.

    Returns:
        ``zero``: inputs where autograd's derivative is exactly 0 on every direction (it
        sees none of backward's dependence); ``partial``: the other flagged inputs (it sees
        part of it). Each in input order; a flagged label unknown to ``problem`` is partial.
    """
    labels = list(problem.labels)
    flagged = {f.input for f in findings if f.code == MISMATCH}
    zero, partial = [], []
    for t, label in enumerate(labels):
        if label in flagged:
            none_seen = bool(grads) and all(not bool(g[t].any()) for g in grads)
            (zero if none_seen else partial).append(label)
    partial += sorted(str(label) for label in flagged - set(labels))
    return zero, partial


def split(session: Session, problem: Problem, findings: list[Finding], cause: str,
          details: dict | None = None, *, in_message: bool = False) -> list[Finding]:
    """``findings`` with every double-backward mismatch replaced by one
    ``double-backward-unsupported`` warning (see the module docstring).

    Args:
        session: the check's session (its cached second-order comparison is read).
        problem: the second-order problem.
        findings: the second-order findings.
        cause: what in backward cuts its graph, for the hint.
        details: extra details of the warning (``cause``).
        in_message: say ``cause`` in the message too (a known cause: Triton kernels).
    """
    grads = session.cache.get("vjp:second_order", (None, []))[1]
    zero, partial = classify(grads, problem, findings)
    if not zero and not partial:
        return findings
    gone = [f for f in findings if f.code == MISMATCH]
    rest = [f for f in findings if f.code != MISMATCH]
    return rest + [finding(session, zero, _example(problem, gone, zero), cause, details,
                           in_message=in_message, partial=partial)]


def finding(session: Session, inputs: list[str], evidence: str, cause: str,
            details: dict | None = None, *, in_message: bool = False,
            partial: list[str] | None = None) -> Finding:
    """The one ``double-backward-unsupported`` warning of a Function.

    Args:
        session: the check's session (which first-order checks ran).
        inputs: the inputs double backward silently returns 0 for ("zero").
        evidence: the numbers that show it (autograd against finite differences).
        cause: what cuts backward's graph, for the hint.
        details: extra details (``cause``) for the JSON.
        in_message: say ``cause`` in the message too, not only in the hint.
        partial: the inputs double backward returns only part of the derivative for.
    """
    partial = list(partial or [])
    ran = [c for c in _FIRST_ORDER if c in session.report.checks] and not any(
        f.is_incomplete and f.check in _FIRST_ORDER for f in session.report.findings)
    first = ("first order verified" if ran else
             "first order not verified here (see the other findings)")
    because = f" ({cause})" if in_message else ""
    said = []
    if inputs:
        said.append(f"backward is not differentiable with respect to {', '.join(inputs)}, "
                    "so double backward through it silently returns 0 for "
                    f"{'it' if len(inputs) == 1 else 'them'}")
    if partial:
        said.append(f"double backward returns only part of the second derivative for "
                    f"{', '.join(partial)} (backward uses values that depend on "
                    f"{'it' if len(partial) == 1 else 'them'} which autograd treats as "
                    "constants)")
    return Finding(
        "double-backward-unsupported", "warning",
        f"{first}; {'; '.join(said)}{because} ({evidence}); this harms only code that "
        "differentiates twice (gradient penalties, MAML, Hessian-vector products)",
        f"{cause}; mark backward @once_differentiable (double backward then raises), or make "
        "backward differentiable (recompute from saved inputs with differentiable torch ops)"
        + REQUIRE_HINT,
        "second_order", None, {"inputs": list(inputs) + partial, "zero": list(inputs),
                               "partial": partial, **(details or {})})


def _example(problem: Problem, mismatches: list[Finding], zero: list[str]) -> str:
    """The first mismatch's numbers: autograd against finite differences."""
    for f in mismatches:
        none = (f"autograd's derivative of backward's result w.r.t. {f.input} is 0 on every "
                "direction tried; " if f.input in zero else "")
        elements = f.details.get("elements") or []
        if elements:
            index, analytic, numerical = elements[0]
            labels = list(problem.labels)
            where = (problem.element(labels.index(f.input), index) if f.input in labels
                     else f"{f.input}[{index}]")
            return (f"{none}at {where} autograd {analytic:.6g}, finite differences "
                    f"{numerical:.6g}")
        probe = f.details.get("probe") or {}
        if "numerical" in probe:
            return (f"{none}along a random direction of {f.input}: autograd "
                    f"{probe['analytic']:.6g}, finite differences {probe['numerical']:.6g}")
    return "autograd's derivative differs from finite differences of backward"
