"""``torch_func``: ``torch.func.grad``, ``vjp`` and ``jacrev`` (and ``jacfwd`` when the Function
has a ``jvp``) run and agree with reverse-mode autograd (already checked against finite
differences by the eager checks). ``vmap`` is its own check (:mod:`gradsmith.checker.vmap`).

An old-style Function (``forward(ctx, ...)`` without ``setup_context``) cannot run under any
``torch.func`` transform; the finding carries the rewrite, built from its own source.
"""

from __future__ import annotations

import textwrap
import traceback
from typing import Any

import torch

from gradsmith.checker.deploy._common import (
    Evaluation,
    comparable_only,
    cotangents,
    describe,
    first_line,
    mismatches,
    reference,
)
from gradsmith.checker.deploy.custom_ops import is_custom_op
from gradsmith.checker.deploy.rewrite import setup_context_rewrite
from gradsmith.checker.inputs import overrides
from gradsmith.checker.report import Finding
from gradsmith.checker.session import Session
from gradsmith.checker.subject import seeded

NAME = "torch_func"
#: Largest Jacobian (output elements x input elements) that jacrev/jacfwd build here.
MAX_JACOBIAN = 20_000
_SETUP_CONTEXT = "must override the setup_context staticmethod"
#: torch.func's own limits (message fragment -> what torch cannot do).
TORCH_LIMITS = {
    "don't yet support saved tensor hooks":
        "saved-tensor hooks (what activation checkpointing and offloading use)",
}


def run(session: Session) -> list[Finding]:
    return comparable_only(session, _run(session), NAME)


def _run(session: Session) -> list[Finding]:
    subject = session.subject
    want = reference(session)
    base = [x.detach().clone() for x in subject.base()]
    vs = cotangents(session, want.outs)
    n = len(base)

    def outs(*xs: torch.Tensor) -> tuple:
        return tuple(subject.select(subject.target.call(*subject.args.build(list(xs),
                                                                            subject.dtype))))

    def loss(*xs: torch.Tensor) -> torch.Tensor:
        return sum((o * v).sum() for o, v in zip(outs(*xs), vs))

    def vjp(*xs: torch.Tensor) -> tuple:
        _, pull = torch.func.vjp(outs, *xs)
        return pull(tuple(vs))

    transforms = [("grad", lambda: torch.func.grad(loss, argnums=tuple(range(n)))(*base)),
                  ("vjp", lambda: vjp(*base))]
    size = sum(o.numel() for o in want.outs) * sum(x.numel() for x in base)
    if size <= MAX_JACOBIAN:
        transforms.append(("jacrev", lambda: _contract(
            torch.func.jacrev(outs, argnums=tuple(range(n)))(*base), vs)))
        if overrides(session.function_cls, "jvp"):
            transforms.append(("jacfwd", lambda: _contract(
                torch.func.jacfwd(outs, argnums=tuple(range(n)))(*base), vs)))
    findings: list[Finding] = []
    for name, transform in transforms:
        try:
            grads = seeded(subject.seed, transform)
        except Exception as exc:  # noqa: BLE001
            found = _error(session, name, exc)
            findings.append(found)
            if found.code != "func-error":
                break  # one cause explains every transform
            continue
        got = Evaluation(want.outs, [g.detach() for g in grads])
        tol = torch.finfo(want.outs[0].dtype).eps ** 0.5 if want.outs else 1e-8
        bad = [b for b in mismatches(session, got, want, tol) if b[0] == "gradient"]
        if bad:
            findings.append(Finding(
                "func-mismatch", "error",
                f"torch.func.{name} disagrees with reverse-mode autograd: {describe(bad)}",
                "torch.func runs forward(*args) + setup_context + backward: forward must not "
                "rely on ctx or on state set outside setup_context", NAME, bad[0][1],
                details={"transform": name, "mismatches": [list(b) for b in bad]}))
    return findings


def _contract(jac: Any, vs: list[torch.Tensor]) -> list[torch.Tensor]:
    """``J^T v`` from ``jac[out][in]`` (shape ``out.shape + in.shape``)."""
    grads = None
    for j_out, v in zip(jac, vs):
        terms = [torch.tensordot(v.to(j.dtype), j, dims=v.dim()) for j in j_out]
        grads = terms if grads is None else [g + t for g, t in zip(grads, terms)]
    return grads or []


def _error(session: Session, name: str, exc: BaseException) -> Finding:
    text = str(exc)
    limit = next((what for frag, what in TORCH_LIMITS.items() if frag in text), None)
    if limit is not None:
        return Finding(
            "func-unsupported-by-torch", "info",
            f"torch.func.{name} does not support {limit} in torch "
            f"{torch.__version__.split('+')[0]} ({first_line(exc)}): torch's own limitation",
            "nothing to fix in the Function", NAME,
            details={"transform": name, "limitation": True})
    if _SETUP_CONTEXT in text and _from_custom_op(session, exc):
        return Finding(
            "func-unsupported-by-torch", "info",
            f"torch.func.{name} cannot differentiate a torch.library.custom_op with "
            f"register_autograd in torch {torch.__version__.split('+')[0]} (torch's own "
            "limitation: its autograd is an old-style Function); reverse mode, compile and "
            "export are what it supports", "nothing to fix in this op", NAME,
            details={"transform": name, "limitation": True})
    if _SETUP_CONTEXT in text:
        cls = session.function_cls
        on_ctx = {f.details.get("attribute") for f in session.report.findings
                  if f.code == "tensor-on-ctx"}  # saved with save_for_backward instead
        rewrite = setup_context_rewrite(cls, on_ctx) if cls is not None and not overrides(
            cls, "setup_context") else None
        hint = ("split forward: `forward(*args)` computes the outputs without ctx, and "
                "`setup_context(ctx, inputs, output)` does every ctx.* call")
        if rewrite:  # indented under the finding's "fix:" line
            hint += ":\n" + textwrap.indent(rewrite, "    ")
        return Finding(
            "func-needs-setup-context", "warning",
            f"torch.func.{name} refuses the Function: forward takes ctx (old style), and "
            "torch.func transforms (grad, vjp, jacrev, vmap) need forward(*args) + "
            "setup_context(ctx, inputs, output)", hint, NAME,
            details={"transform": name, "rewrite": rewrite})
    return Finding(
        "func-error", "warning",
        f"torch.func.{name} raised {first_line(exc)}",
        "torch.func needs forward and backward made of torch operations: no .item(), "
        ".numpy(), in-place writes to inputs or data-dependent Python control flow", NAME,
        details={"transform": name, "exception": type(exc).__name__})


def _from_custom_op(session: Session, exc: BaseException) -> bool:
    if is_custom_op(session.subject.target.call):
        return True
    frames = traceback.extract_tb(exc.__traceback__)
    return any("/torch/_library/" in f.filename for f in frames)
