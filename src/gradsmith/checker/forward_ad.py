"""Point 3a: a Function's ``jvp`` (forward-mode AD) against finite differences ``J u``."""

from __future__ import annotations

import torch
import torch.autograd.forward_ad as fwAD

from gradsmith.checker.inputs import overrides
from gradsmith.checker.report import Finding
from gradsmith.checker.session import Session, Skip
from gradsmith.checker.tensors import max_diff

NAME = "forward_ad"


def run(session: Session) -> list[Finding]:
    if not overrides(session.function_cls, "jvp"):
        raise Skip("the Function defines no jvp")
    subject = session.subject
    problem = session.problem
    base = subject.base()
    gen = session.generator(23)
    us = [torch.randn(x.shape, generator=gen, dtype=torch.float64).to(x.dtype) for x in base]
    try:
        with fwAD.dual_level():
            duals = [fwAD.make_dual(x.clone(), u) for x, u in zip(base, us)]
            outs = subject.select(subject.call(duals))
            tangents = [fwAD.unpack_dual(o).tangent for o in outs]
    except Exception as exc:  # noqa: BLE001
        return [Finding("jvp-error", "error", f"forward-mode AD raised {type(exc).__name__}: "
                        f"{exc}", "make jvp(ctx, *tangents) return one tangent per output, "
                        "shaped like it; save what it needs with ctx.save_for_forward", NAME)]
    h = session.settings.h
    plus = problem.value([x + h * u for x, u in zip(base, us)], frozenset(range(len(base))))
    minus = problem.value([x - h * u for x, u in zip(base, us)], frozenset(range(len(base))))
    numerical = problem.split((plus - minus) / (2 * h))
    s = session.settings
    findings = []
    for label, t, n in zip(subject.out_labels, tangents, numerical):
        t = torch.zeros_like(n) if t is None else t
        if t.shape != n.shape or not bool(((t - n).abs() <= s.atol + s.rtol * n.abs()).all()):
            findings.append(Finding(
                "jvp-mismatch", "error",
                f"jvp tangent of {label} differs from finite differences along a random "
                f"direction (max difference {max_diff(t.reshape(n.shape), n) if t.numel() == n.numel() else float('nan'):.3g})",
                "derive jvp from forward (tangent_out = J @ tangent_in); it must agree with "
                "backward's transpose", NAME, label))
    return findings
