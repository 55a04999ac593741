"""Second order: a backward autograd cannot differentiate, told apart from a wrong one.

The policy (docs/check.md, "second_order"): an error means demonstrated harm. Where finite
differences of backward's result are clearly non-zero, autograd's derivative of it is either

* exactly 0 for an input on every direction tried (no graph: values from forward used as
  constants, ``.detach()``, numpy, a compiled kernel): double backward silently returns 0
  for that input. That harms only code that differentiates twice (gradient penalties, MAML,
  Hessian-vector products), like a Function that breaks under ``torch.compile`` harms only
  those who compile: one ``double-backward-unsupported`` warning per Function naming the
  inputs, an error where the project requires ``second-order``; or
* non-zero and different: backward's own graph computes wrong math, a
  ``double-backward-mismatch`` error (also when only some entries are 0).
"""

from __future__ import annotations

import torch

from gradsmith.checker.problem import Problem
from gradsmith.checker.report import Finding
from gradsmith.checker.session import Session

CODE = "double-backward-unsupported"
#: What makes a ``double-backward-unsupported`` warning fail: the requirable name.
REQUIRED_AS = "second-order"
_FIRST_ORDER = ("gradients", "surrogate", "reference", "approximate")


def missing(grads: list[list[torch.Tensor]], problem: Problem,
            findings: list[Finding]) -> list[str]:
    """Labels of inputs whose double-backward mismatch is a missing derivative.

    Args:
        grads: autograd's derivative of backward's result, one list per direction tried,
            one tensor per input of ``problem`` (the comparison's analytic side).
        problem: the second-order problem ``(x..., v...) -> J(x)^T v``.
        findings: the second-order findings; a ``double-backward-mismatch`` on an input
            says finite differences differ from autograd beyond tolerance there.

    Returns:
        Inputs with a mismatch where autograd's derivative is exactly 0 on every direction
        (so finite differences are the non-zero side), in input order.
    """
    labels = list(problem.labels)
    flagged = {f.input for f in findings if f.code == "double-backward-mismatch"}
    return [label for t, label in enumerate(labels)
            if label in flagged and grads and all(not bool(g[t].any()) for g in grads)]


def split(session: Session, problem: Problem, findings: list[Finding], cause: str,
          details: dict | None = None, *, in_message: bool = False) -> list[Finding]:
    """``findings`` with the mismatches of missing derivatives replaced by one
    ``double-backward-unsupported`` warning (see the module docstring).

    Args:
        session: the check's session (its cached second-order comparison is read when
            ``grads`` is None).
        problem: the second-order problem.
        findings: the second-order findings.
        cause: what in backward cuts its graph, for the hint.
        details: extra details of the warning (``cause``).
        in_message: say ``cause`` in the message too (a known cause: Triton kernels).
    """
    grads = session.cache.get("vjp:second_order", (None, []))[1]
    inputs = missing(grads, problem, findings)
    if not inputs:
        return findings
    gone = [f for f in findings if f.code == "double-backward-mismatch" and f.input in inputs]
    rest = [f for f in findings if f not in gone]
    return rest + [finding(session, inputs, _example(problem, gone), cause, details,
                           in_message=in_message)]


def finding(session: Session, inputs: list[str], evidence: str, cause: str,
            details: dict | None = None, *, in_message: bool = False) -> Finding:
    """The one ``double-backward-unsupported`` warning of a Function.

    Args:
        session: the check's session (which first-order checks ran).
        inputs: the inputs double backward silently returns 0 for.
        evidence: the numbers that show it (autograd 0, finite differences not).
        cause: what cuts backward's graph, for the hint.
        details: extra details (``cause``) for the JSON.
        in_message: say ``cause`` in the message too, not only in the hint.
    """
    names = ", ".join(inputs)
    ran = [c for c in _FIRST_ORDER if c in session.report.checks]
    first = ("first order verified" if ran else
             "first order not verified here (see the other findings)")
    because = f" ({cause})" if in_message else ""
    return Finding(
        "double-backward-unsupported", "warning",
        f"{first}; backward is not differentiable with respect to {names}{because}, so double "
        f"backward through it silently returns 0 for {'it' if len(inputs) == 1 else 'them'} "
        f"({evidence}); this harms only code that differentiates twice (gradient penalties, "
        "MAML, Hessian-vector products)",
        f"{cause}; mark backward @once_differentiable (double backward then raises), or make "
        "backward differentiable (recompute from saved inputs with differentiable torch ops); "
        f"`--require {REQUIRED_AS}` (or require = [\"{REQUIRED_AS}\"] in "
        "[tool.gradsmith.check]) makes this fail",
        "second_order", None, {"inputs": list(inputs), **(details or {})})


def _example(problem: Problem, mismatches: list[Finding]) -> str:
    """The first mismatch's numbers: autograd 0 against finite differences."""
    for f in mismatches:
        elements = f.details.get("elements") or []
        if elements:
            index, analytic, numerical = elements[0]
            where = problem.element(list(problem.labels).index(f.input), index)
            return (f"autograd's derivative of backward's result w.r.t. {f.input} is 0 on "
                    f"every direction tried; at {where} autograd {analytic:.6g}, finite "
                    f"differences {numerical:.6g}")
        probe = f.details.get("probe") or {}
        if "numerical" in probe:
            return (f"along a random direction of {f.input}: autograd "
                    f"{probe['analytic']:.6g}, finite differences {probe['numerical']:.6g}")
    return "autograd's derivative is 0, finite differences of backward are not"
