"""Second order's cost bounded by the Function's own measured cost.

Exact mode spends two evaluations of backward-with-its-graph per input element (plus
re-judging); on a Function whose one evaluation takes 50 ms (a semi-Markov CRF's streaming
scan, 200 Sinkhorn iterations) 335 elements cost 50 s, past a row's time limit, and the row
became a timeout: nothing about second order was said. Only where the random-direction
screen did not pass (the common path is untouched), one evaluation is timed; when the
element-by-element comparison would take longer than :data:`BUDGET_S`, every input is
probed along random directions instead (mode ``probe``: a few evaluations per input,
bisection only where a probe fails), and the report says so (``second-order-probed``).
"""

from __future__ import annotations

import time

import torch

from gradsmith.checker.problem import Problem
from gradsmith.checker.report import Finding

#: Seconds the element-by-element second-order comparison may be expected to take.
BUDGET_S = 3.0
KEY = "probed:second_order"
#: Confirmed elements after which a slow Function's probe stops re-judging (each costs up to
#: 20 evaluations): the disagreement is demonstrated and folds into one warning.
ENOUGH = 2
#: Evaluations one re-judged element costs at most (kink test, four larger steps, jump test).
JUDGE = 20


def over_budget(problem: Problem, total: int) -> dict | None:
    """The measured cost (``per_evaluation_s``, ``estimated_s``) when comparing ``total``
    elements one by one would exceed :data:`BUDGET_S`, else None.

    The screen failed, so a disagreement is likely: the estimate counts two evaluations per
    element and the re-judging of up to ``SECOND_ORDER_ENOUGH`` elements per input (about
    :data:`JUDGE` evaluations each). One evaluation is ``f(x)`` timed twice, the faster kept
    (a first call may pay one-off costs); the result is exact mode's base point
    (:func:`numerics._base`), so it is not wasted."""
    from gradsmith.checker import gradients, numerics

    judged = gradients.SECOND_ORDER_ENOUGH or numerics.MAX_CONFIRM  # None: every one

    per = float("inf")
    for _ in range(2):
        began = time.perf_counter()
        f0 = problem.value().to(torch.float64)
        per = min(per, time.perf_counter() - began)
    problem.__dict__["_fd_base"] = f0
    estimate = per * (2 * total + JUDGE * judged * len(problem.xs))
    if estimate <= BUDGET_S:
        return None
    return {"per_evaluation_s": round(per, 4), "estimated_s": round(estimate, 1),
            "elements": total, "budget_s": BUDGET_S}


def finding(cost: dict, check: str) -> Finding:
    """Info: second order was probed along random directions, not element by element."""
    return Finding(
        "second-order-probed", "info",
        f"second order was compared along random directions (probes, with bisection where "
        f"one disagrees) instead of element by element: one evaluation of backward with its "
        f"graph took {cost['per_evaluation_s']:.2g} s, so the {cost['elements']} elements' "
        f"differences would have taken about {cost['estimated_s']:.0f} s (budget "
        f"{cost['budget_s']:.0f} s). A wrong second derivative moves the probed directions "
        "and is found; elements are not compared one by one" + _rest(cost),
        "a note, not a defect: to compare second order element by element, check on "
        "smaller inputs (@gradsmith.example)",
        check, details=dict(cost))


def _rest(cost: dict) -> str:
    """The inputs left out once one disagreed (the mismatch was already demonstrated)."""
    rest = cost.get("not_compared")
    return (f". Once one input disagreed, the rest were not compared ({', '.join(rest)}): "
            "the second-order mismatch is demonstrated, they would only add cost" if rest
            else "")
