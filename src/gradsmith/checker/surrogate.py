"""Point 9: an intentional custom gradient (straight-through estimator, clipped or scaled
gradient) is verified against the autograd gradient of a declared surrogate ``g``."""

from __future__ import annotations

import torch

from gradsmith.checker import gradients
from gradsmith.checker.problem import Problem, index_str
from gradsmith.checker.report import Finding
from gradsmith.checker.session import Session, Skip

NAME = "surrogate"


def run(session: Session) -> list[Finding]:
    if session.surrogate is None:
        raise Skip("no surrogate declared")
    subject = session.subject
    surrogate = session.surrogate

    def f(xs: list[torch.Tensor], fresh: set[int]) -> list[torch.Tensor]:
        args = subject.build([x if i in fresh else x.clone() for i, x in enumerate(xs)])
        state = torch.get_rng_state()
        torch.default_generator.manual_seed(subject.seed)
        try:
            out = surrogate(*args)
        finally:
            torch.set_rng_state(state)
        return subject.select(out) if not isinstance(out, torch.Tensor) else [out]

    ref = Problem(f, subject.base(), subject.labels, subject.out_labels)
    mine = session.problem
    try:
        ref.linearize()
    except Exception as exc:  # noqa: BLE001
        return [Finding("surrogate-error", "error",
                        f"the surrogate raised {type(exc).__name__}: {exc}",
                        "give a differentiable function with the Function's signature", NAME)]
    mine.linearize()
    if [s for s in ref.out_shapes] != list(mine.out_shapes):
        return [Finding(
            "surrogate-error", "error",
            f"surrogate outputs have shapes {[tuple(s) for s in ref.out_shapes]}, the "
            f"Function's differentiable outputs {[tuple(s) for s in mine.out_shapes]}",
            "the surrogate must return outputs shaped like the Function's", NAME)]
    gen = session.generator(17)
    findings = []
    s = session.settings
    for _ in range(2):
        v = torch.randn(mine.m, generator=gen, dtype=torch.float64).to(mine.xs[0].dtype)
        got = gradients.analytic(mine, [v], NAME)[0]
        want = ref.vjp(v)
        for t, (a, b) in enumerate(zip(got, want)):
            bad = ((a - b).abs() > s.atol + s.rtol * b.abs()) | (a.isnan() != b.isnan())
            if bad.any():
                x = mine.xs[t]
                idx = torch.nonzero(bad.reshape(-1)).reshape(-1)
                j = int(idx[0])
                label = subject.labels[t]
                findings.append(Finding(
                    "surrogate-mismatch", "error",
                    f"backward for {label} differs from the surrogate's gradient at "
                    f"{len(idx)} of {x.numel()} elements; first {label}{index_str(j, x.shape)}"
                    f": backward {float(a.reshape(-1)[j]):.6g}, surrogate "
                    f"{float(b.reshape(-1)[j]):.6g}",
                    "make backward implement the surrogate's derivative (e.g. the clipped "
                    "identity of a straight-through estimator), or fix the surrogate", NAME,
                    label, {"elements": idx[:20].tolist()}))
        if findings:
            break
    return findings
