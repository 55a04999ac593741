"""A backward whose result does not depend on the incoming gradient (private).

``return torch.ones(grad_output.shape)`` where ``grad_output`` belongs (a rounding op's
"straight-through" backward), or a fused loss returning the gradient it stored in forward
"assuming grad_output is 1": backward gives the same gradient whatever the loss. The gradients
check's own two random incoming gradients show it: backward returned the same non-zero gradient
for both, so a loss scaled by 4 (gradient accumulation) or by 1024 (a ``GradScaler``) trains
with the unscaled gradient. Some Functions do it by design (an added loss, a feedback signal
injected in backward: the ``intended=`` families), so this never changes a verdict or a code:
where an ``undeclared-estimator`` finding has no checked declaration, it names that harm, so
the reader of a rounding op's row learns it is a defect, not a missing declaration.
"""

from __future__ import annotations

import torch

from gradsmith.checker.numerics import InputResult
from gradsmith.checker.report import Finding


def ignoring(results: list[InputResult], vs: list[torch.Tensor],
             grads: list[list[torch.Tensor]]) -> list[str]:
    """Labels of the failing inputs whose gradient is the same, and not zero, for two
    different incoming gradients."""
    if len(vs) < 2 or len(grads) < 2 or torch.equal(vs[0], vs[1]):
        return []
    labels = []
    for res in results:
        if not res.failed or res.nan_analytic:
            continue
        first, second = grads[0][res.t], grads[1][res.t]
        if first.shape != second.shape or not bool(first.ne(0).any()):
            continue
        if float((first - second).abs().max()) <= 1e-12 * max(float(first.abs().max()), 1.0):
            labels.append(res.label)
    return labels


def name_harm(finding: Finding, results: list[InputResult], vs: list[torch.Tensor],
              grads: list[list[torch.Tensor]]) -> None:
    """Add to ``finding`` that backward ignores grad_output, where it does."""
    labels = ignoring(results, vs, grads)
    if not labels:
        return
    names = ", ".join(labels)
    finding.message += (
        f". Backward ignores grad_output for {names}: it returned the same gradient for two "
        "different random incoming gradients, so no loss's gradient flows through it (a loss "
        "scaled by 4 for gradient accumulation, or by 1024 by a GradScaler, gets the unscaled "
        "gradient)")
    finding.hint = ("multiply by grad_output (return grad_output * the local derivative, not a "
                    "tensor built from grad_output's shape such as torch.ones(grad_output.shape)"
                    "); " + finding.hint)
    finding.details["ignores_grad_output"] = labels
