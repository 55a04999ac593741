"""Point 6: the same results with non-contiguous inputs and incoming gradients; a backward
that gives the same answer twice, and a finite one at large inputs where forward is finite
(:mod:`~gradsmith.checker.extremes`)."""

from __future__ import annotations

import torch

from gradsmith.checker import extremes, zeros
from gradsmith.checker import noncontiguous as layouts
from gradsmith.checker.report import Finding
from gradsmith.checker.session import Session
from gradsmith.checker.subject import seeded
from gradsmith.checker.tensors import close, max_diff, noncontiguous, rounding_only

NAME = "robustness"


def forward_backward(session: Session, values: list[torch.Tensor], wrt: list[torch.Tensor],
                     grads: list[torch.Tensor], others=None, seed=None):
    """Outputs and input gradients for one fresh forward/backward."""
    subject = session.subject
    outs = subject.select(subject.call(values, seed=seed, others=others))
    # Clones: a backward that writes into grad_output must not poison the next run.
    pairs = [(o, g.clone(memory_format=torch.preserve_format) if g.is_contiguous()
              else _noncontig_clone(g)) for o, g in zip(outs, grads) if o.requires_grad]
    # Backward runs from a fixed random state too: fresh noise in backward is the randomness
    # check's finding, not a layout or determinism problem.
    res = seeded(subject.seed + 77, torch.autograd.grad, [o for o, _ in pairs], wrt,
                 [g for _, g in pairs], allow_unused=True)
    return [o.detach() for o in outs], list(res)


def _noncontig_clone(g: torch.Tensor) -> torch.Tensor:
    return noncontiguous(g)


def tolerances(session: Session) -> tuple[float, float]:
    """Layout changes may reorder floating-point sums (BLAS paths): allow a few ulps."""
    eps = session.settings.eps
    return 1e6 * eps, 1e5 * eps


def random_forward(session: Session, base: list[torch.Tensor],
                   backward: tuple[list[torch.Tensor], list] | None = None) -> bool:
    """True when forward's outputs depend on the random state, or (``backward``: incoming
    gradients and the input gradients of a run from the usual state) the gradients backward
    computes from what forward saved do (a derivative stored with a random dither: icefall's
    DoubleSwish), backward's own state held fixed."""
    subject = session.subject
    a = subject.select(subject.call([x.clone() for x in base], seed=subject.seed + 1))
    b = subject.select(subject.call([x.clone() for x in base], seed=subject.seed + 2))
    if not all(close(x, y, 0, 0) for x, y in zip(a, b)):
        return True
    if backward is None:
        return False
    grads, ref_grads = backward
    leaves = [x.clone().requires_grad_(True) for x in base]
    try:
        _, other = forward_backward(session, [x.clone() for x in leaves], leaves, grads,
                                    seed=subject.seed + 1)
    except Exception:  # noqa: BLE001 - the gradients check reports backward errors
        return False
    return not all(close(x, y, 0, 0) for x, y in zip(ref_grads, other))


def run(session: Session) -> list[Finding]:
    subject = session.subject
    base = subject.base()
    session.problem.linearize()
    shapes = session.problem.out_shapes
    gen = session.generator(5)
    grads = [torch.randn(s, generator=gen, dtype=torch.float64).to(base[0].dtype) for s in shapes]
    rtol, atol = tolerances(session)
    leaves = [x.clone().requires_grad_(True) for x in base]
    ref_out, ref_grads = forward_backward(session, [x.clone() for x in leaves], leaves, grads)
    findings = []

    # Non-contiguous inputs: views into a larger buffer, so in-place (mark_dirty) forwards work.
    # Skipped for random forwards: rand_like follows the memory layout, so a different layout
    # legitimately draws different noise (in the outputs, or in what forward saves).
    if not random_forward(session, base, (grads, ref_grads)):
        findings += layouts.input_findings(
            session, base, grads, ref_out, ref_grads, rtol, atol,
            lambda views, leaves, gs, others: forward_backward(session, views, leaves, gs,
                                                               others))
    nc_grads = [noncontiguous(g) for g in grads]
    leaves2 = [x.clone().requires_grad_(True) for x in base]
    findings += layouts.grad_output_finding(subject, layouts.compare(
        subject, ref_out, ref_grads,
        lambda: forward_backward(session, [x.clone() for x in leaves2], leaves2, nc_grads),
        rtol, atol))
    leaves3 = [x.clone().requires_grad_(True) for x in base]
    try:
        _, again = forward_backward(session, [x.clone() for x in leaves3], leaves3, grads)
    except Exception:  # noqa: BLE001 - the gradients check reports backward errors
        return findings
    for label, a, b in zip(subject.labels, ref_grads, again):
        if close(a, b, rtol=0, atol=0):
            continue
        diff = max_diff(_z(a, b), _z(b, a))
        if rounding_only(a, b, session.settings.eps):
            findings.append(Finding(
                "nondeterministic-backward", "warning",
                f"two identical forward/backward runs give gradients for {label} that differ "
                f"in their last bits only (max difference {diff:.3g}, rounding order at the "
                "precision computed in: atomic adds or a parallel reduction): not a wrong "
                "gradient, but runs are not bitwise reproducible",
                "nothing to fix for correctness; for bitwise reproducibility reduce in a fixed "
                "order (torch.use_deterministic_algorithms for torch's own ops)", NAME, label))
            continue
        findings.append(Finding(
            "nondeterministic-backward", "error",
            f"two identical forward/backward runs give different gradients for {label} "
            f"(max difference {diff:.3g})",
            "make backward a pure function of ctx's saved state and grad_output: no "
            "counters or state on ctx/globals changed between calls, no unseeded randomness",
            NAME, label))
    # last: a backward counting its calls must show the two runs above differing
    return (findings + extremes.findings(session, base, grads, NAME)  # exp(-x / a) overflowing
            + zeros.findings(session, base, grads, NAME))  # a zero-angle branch that crashes


def _z(a, b):
    return torch.zeros_like(b) if a is None else a
