"""A small gradient disagreement where backward computes outside torch: unresolved, not an error.

lp-sparsemap's ``_LPSparseMAP`` (corpus 14c dev) hands grad_output to a compiled routine
(``fg.jacobian_vec(du.numpy(), out.numpy())``, AD3's iterative Jacobian-vector solve that stops
at ``atol=1e-8`` of its residual). Its gradient agrees with finite differences to about 2e-4
of the gradient's scale, and to 2e-6 when the same routine is asked for ``atol=1e-14``: the
disagreement is the solve's tolerance, not a wrong formula. Element-wise float64 tolerances
(``1e-5 + 1e-3 |numerical|``) fail it where a random projection cancels to ~1e-5.

Nothing outside the routine can tell its stopping tolerance from a small wrong factor, so the
rule demonstrates no harm either way. It applies to an input only when backward (its own
source) converts tensors to NumPy (``.numpy()``: the gradient is computed by code gradsmith
cannot differentiate or read) and every disagreeing element is within :data:`RELATIVE` of the
largest gradient element backward returned for that input on any direction. Then the
``gradient-mismatch`` becomes an INCOMPLETE warning that states the agreement reached; a
backward off by a factor, a sign or a transpose deviates by far more than that and keeps its
error. A backward written in torch is never touched.
"""

from __future__ import annotations

import ast

from gradsmith.checker.report import Finding
from gradsmith.checker.session import Session
from gradsmith.discovery.source import parse

#: Largest disagreement, relative to the gradient's scale, read as an opaque solve's tolerance.
RELATIVE = 5e-3


def findings(session: Session, results: list, grads: list, check: str
             ) -> tuple[list[Finding], set[int]]:
    """INCOMPLETE warnings for inputs whose only disagreement is within an opaque backward's
    precision, and the indices of those inputs (their ``gradient-mismatch`` is replaced)."""
    if not grads or not _leaves_torch(session.function_cls):
        return [], set()
    out, replaced = [], set()
    for res in results:
        if not res.mismatches or res.nan_analytic or res.probe.get("failed"):
            continue
        scale = max((float(g[res.t].abs().max()) for g in grads
                     if g[res.t] is not None and g[res.t].numel()), default=0.0)
        worst = max(abs(e.analytic - e.numerical) for e in res.mismatches)
        if not scale > 0 or worst > RELATIVE * scale:
            continue
        replaced.add(res.t)
        out.append(Finding(
            "check-incomplete", "warning",
            f"the gradient of {res.label} agrees with finite differences only to "
            f"{worst / scale:.1e} of its scale (worst difference {worst:.3g}, largest element "
            f"{scale:.3g}): backward computes it outside torch (through .numpy()), where an "
            "iterative routine stopping at its tolerance gives exactly this, and gradsmith "
            "cannot tell that tolerance from a small error. The gradient is not confirmed, so "
            "the verdict is INCOMPLETE",
            "if this accuracy is the routine's contract, check with --atol/--rtol at that "
            "accuracy (or tighten the routine's tolerance for the check)",
            check, res.label,
            {"reason": "opaque backward within its tolerance", "incomplete": True,
             "relative": worst / scale}))
    return out, replaced


def _leaves_torch(cls: type | None) -> bool:
    """Whether backward's own source calls ``.numpy()``."""
    backward = getattr(cls, "backward", None) if cls is not None else None
    tree = parse(backward) if backward is not None else None
    return tree is not None and any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "numpy"
        for n in ast.walk(tree))
