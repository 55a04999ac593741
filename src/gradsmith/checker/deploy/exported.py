"""``export``: ``torch.export`` of a module that calls the Function, and what the exported
program computes.

``torch.export`` traces *through* a Function's forward into ATen operations: the exported
program has no custom backward. Its gradients (``ep.module()`` run under autograd) are the
autograd gradients of the traced forward. For a Function whose backward *is* the gradient of
its forward that changes nothing; for an estimator, a surrogate or an intended modification
(straight-through sign, gradient reversal, clipping) the exported model silently trains with
another gradient (zero, for ``sign``). ``torch.library.custom_op`` with ``register_autograd``
is the form that export keeps as one operator with its gradient formula.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_unflatten

from gradsmith.checker.deploy._common import (
    comparable_only,
    describe,
    evaluate,
    first_line,
    mismatches,
    quiet_dynamo,
    reference,
    user_frame_of,
)
from gradsmith.checker.deploy.compiled import EXPLAINED_BY
from gradsmith.checker.report import Finding
from gradsmith.checker.session import Session, Skip

NAME = "export"
CUSTOM_OP_HINT = (
    "to train an exported model with this gradient, define the operation with "
    "torch.library.custom_op and attach the backward with register_autograd (export keeps a "
    "custom op as one node with its formula, given a fake kernel: register_fake); for "
    "inference-only export nothing is lost")


class _Call(torch.nn.Module):
    """``forward(*tensors)`` rebuilds the argument tuple and calls the target: tensors become
    the exported program's inputs, everything else is baked in as a constant."""

    def __init__(self, call: Any, flat: list[Any], spec: Any, tensor_pos: list[int]) -> None:
        super().__init__()
        self.call, self.flat, self.spec, self.tensor_pos = call, flat, spec, tensor_pos

    def forward(self, *tensors: torch.Tensor) -> Any:
        flat = list(self.flat)
        for i, t in zip(self.tensor_pos, tensors):
            # A clone, as the eager checks pass: inputs are non-leaves an in-place
            # (mark_dirty) Function may modify, not leaves that require grad.
            flat[i] = t.clone()
        return self.call(*tree_unflatten(flat, self.spec))


def exported_call(session: Session, args: tuple) -> Any:
    """A callable with the target's signature that runs the exported program of ``args``."""
    flat, spec = tree_flatten(tuple(args))
    pos = [i for i, v in enumerate(flat) if isinstance(v, torch.Tensor)]
    module = _Call(session.subject.target.call, flat, spec, pos)
    with quiet_dynamo():
        program = torch.export.export(module, tuple(flat[i] for i in pos), strict=False)
    runner = program.module()

    def call(*call_args: Any) -> Any:
        leaves, _ = tree_flatten(tuple(call_args))
        return runner(*[leaves[i] for i in pos])

    return call


def run(session: Session) -> list[Finding]:
    return comparable_only(session, _run(session), NAME)


def _run(session: Session) -> list[Finding]:
    explained = [f.code for f in session.report.findings if f.code in EXPLAINED_BY]
    if explained:
        raise Skip(f"the custom op's fake kernel cannot trace it ({explained[0]})")
    subject = session.subject
    want = reference(session)
    # Inputs that require grad, as in training: a forward may branch on requires_grad.
    example = subject.args.build([x.detach().clone().requires_grad_(True)
                                  for x in subject.base()], subject.dtype)
    try:
        call = exported_call(session, example)
    except Exception as exc:  # noqa: BLE001
        return [_export_error(exc)]
    try:
        got = evaluate(session, call)
    except Exception as exc:  # noqa: BLE001 - e.g. outputs that no longer require grad
        return [Finding(
            "export-drops-backward", "warning",
            f"the exported program cannot be differentiated ({first_line(exc)}): torch.export "
            "keeps the forward only", CUSTOM_OP_HINT, NAME,
            details={"exception": type(exc).__name__})]
    outs_bad = [b for b in mismatches(session, got, want, _tolerance(want)) if b[0] == "output"]
    if outs_bad:
        return [Finding(
            "export-mismatch", "error",
            f"the exported program computes different outputs than eager: {describe(outs_bad)}",
            "forward depends on something export bakes in as a constant (Python state, a "
            "data-dependent branch taken once); keep it a function of its tensor inputs",
            NAME, outs_bad[0][1], details={"mismatches": [list(b) for b in outs_bad]})]
    # Parameters of module arguments become the exported program's own (lifted) parameters,
    # so no gradient reaches the caller's: only tensor arguments are compared.
    params = {d.label for d in getattr(subject.args, "inputs", []) if d.param is not None}
    grads_bad = [b for b in mismatches(session, got, want, _tolerance(want))
                 if b[0] == "gradient" and b[1] not in params]
    if not grads_bad:
        return []
    zero = all(float(g.abs().max()) == 0.0 for g in got.grads if g.numel())
    what = "zero gradients" if zero else "the gradients of the traced forward"
    return [Finding(
        "export-drops-backward", "warning",
        f"torch.export keeps the forward only: the exported program trains with {what}, not "
        f"with this Function's backward: {describe(grads_bad)}. Expected for estimators, "
        "surrogates and intended gradient modifications, whose backward is not the gradient "
        "of their forward", CUSTOM_OP_HINT, NAME, grads_bad[0][1],
        details={"mismatches": [list(b) for b in grads_bad], "zero": zero})]


def _tolerance(want: Any) -> float:
    dtype = want.outs[0].dtype if want.outs else torch.float64
    return torch.finfo(dtype).eps ** 0.5


def _export_error(exc: BaseException) -> Finding:
    where = user_frame_of(exc)
    at = f" at {where[0]}:{where[1]}" if where else ""
    return Finding(
        "export-error", "warning",
        f"torch.export.export of a module calling the Function raised {first_line(exc)}{at}",
        "export needs a forward made of torch operations with no data-dependent Python "
        "control flow (.item(), .tolist(), branches on tensor values); use torch.cond or "
        "torch._check for data-dependent parts, or a torch.library.custom_op with a fake "
        "kernel for code export cannot trace", NAME,
        details={"exception": type(exc).__name__})
