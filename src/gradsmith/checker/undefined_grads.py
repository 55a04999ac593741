"""Undefined incoming gradients: a Function with several outputs, used with only some of them.

When the loss does not use an output, autograd has no gradient for it. By default backward
receives zeros there; after ``ctx.set_materialize_grads(False)`` it receives ``None`` and must
treat it as zeros. gradcheck's ``check_undefined_grad`` tests this; here each differentiable
output in turn is left out of the backward call, and the gradients must equal the full
vector-Jacobian product with a zero incoming gradient for that output.
"""

from __future__ import annotations

import torch

from gradsmith.checker.report import Finding
from gradsmith.checker.session import Session
from gradsmith.checker.tensors import close, max_diff

NAME = "structure"


def findings(session: Session) -> list[Finding]:
    """One finding per output whose absence from the loss breaks backward."""
    subject = session.subject
    if len(subject.out_pos) < 2:
        return []
    base = subject.base()
    gen = session.generator(31)
    out: list[Finding] = []
    for k, label in enumerate(subject.out_labels):
        leaves = [x.clone().requires_grad_(True) for x in base]
        outs = subject.select(subject.call([x.clone() for x in leaves]))
        vs = [torch.randn(o.shape, generator=gen, dtype=torch.float64).to(o.dtype) for o in outs]
        kept = [(o, v) for i, (o, v) in enumerate(zip(outs, vs)) if i != k and o.requires_grad]
        if not kept:
            continue
        try:
            got = torch.autograd.grad([o for o, _ in kept], leaves, [v for _, v in kept],
                                      allow_unused=True)
        except Exception as exc:  # noqa: BLE001 - the user's backward on a None gradient
            out.append(_raised(label, exc, session))
            continue
        ref_leaves = [x.clone().requires_grad_(True) for x in base]
        ref_outs = subject.select(subject.call([x.clone() for x in ref_leaves]))
        ref_vs = [torch.zeros_like(v) if i == k else v for i, v in enumerate(vs)]
        pairs = [(o, v) for o, v in zip(ref_outs, ref_vs) if o.requires_grad]
        want = torch.autograd.grad([o for o, _ in pairs], ref_leaves, [v for _, v in pairs],
                                   allow_unused=True)
        for name, a, b in zip(subject.labels, got, want):
            if not close(a, b, 1e-7, 1e-9):
                out.append(Finding(
                    "undefined-grad-mismatch", "error",
                    f"when {label} is not used in the loss (no incoming gradient for it), the "
                    f"gradient of {name} differs from the full gradient with zeros for "
                    f"{label} (max difference {_diff(a, b):.3g})",
                    "treat a missing (None) incoming gradient exactly as zeros: skip its "
                    "contribution, do not substitute another value", NAME, name,
                    {"output": label}))
                break
    return out


def _diff(a, b) -> float:
    a = torch.zeros_like(b) if a is None else a
    b = torch.zeros_like(a) if b is None else b
    return max_diff(a, b)


def _raised(label: str, exc: BaseException, session: Session) -> Finding:
    from gradsmith.checker.explain import describe, user_frame

    frame = user_frame(exc, session.function_cls)
    details = {"output": label, "exception": type(exc).__name__}
    if frame:
        details["where"] = frame
    return Finding(
        "undefined-grad-error", "error",
        f"backward raised {type(exc).__name__}: {exc}{describe(frame)} when {label} is not "
        "used in the loss: with ctx.set_materialize_grads(False), backward receives None for "
        "an output without gradient (a user who ignores that output hits this)",
        "test each incoming gradient for None and treat it as zeros (`if grad is None:` skip "
        "its contribution), or leave materialize_grads on", NAME, label, details)
