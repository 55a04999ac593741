"""Point 7: random forwards are checked by replaying the RNG; a backward that draws fresh
noise (instead of reusing the forward's mask or sample) is caught by running it under two
different random states."""

from __future__ import annotations

import torch

from gradsmith.checker import declared
from gradsmith.checker.report import Finding
from gradsmith.checker.session import Session
from gradsmith.checker.subject import seeded
from gradsmith.checker.tensors import close, max_diff, rounding_only

NAME = "randomness"
PROBES = 6  # extra random states tried at backward time before a gradient is called fixed


def run(session: Session) -> list[Finding]:
    subject = session.subject
    findings = []
    base = subject.base()
    first = subject.select(subject.call([x.clone() for x in base], seed=subject.seed + 1))
    second = subject.select(subject.call([x.clone() for x in base], seed=subject.seed + 2))
    random_forward = not all(close(a, b, 0, 0) for a, b in zip(first, second))
    if random_forward:
        findings.append(Finding(
            "random-forward", "info",
            "forward draws random numbers; every evaluation replayed the same random state so "
            "its gradients could be compared",
            "nothing to fix; make sure backward reuses the forward's noise (save the mask)",
            NAME))
    same = subject.select(subject.call([x.clone() for x in base], seed=subject.seed + 1))
    if not all(close(a, b, 0, 0) for a, b in zip(first, same)):
        findings.append(Finding(
            "nondeterministic-forward", "warning",
            "forward gives different outputs for the same inputs and random state (global "
            "state, time, or unseeded generators): finite differences are unreliable",
            "make forward a function of its inputs and the torch random state", NAME))
    shapes = [o.shape for o in subject.select(subject.call([x.clone() for x in base]))]
    gen = session.generator(13)
    grads = [torch.randn(s, generator=gen, dtype=torch.float64).to(base[0].dtype)
             for s in shapes]

    def grad_at(seed):
        # A graph per backward: a backward may write into what it saved (see Problem.vjp).
        leaves = [x.clone().requires_grad_(True) for x in base]
        outs = subject.select(subject.call([x.clone() for x in leaves]))
        return seeded(seed, torch.autograd.grad, outs, leaves,
                      [g.to(o.dtype) for g, o in zip(grads, outs)], allow_unused=True)

    first, again = grad_at(1234), grad_at(1234)
    # More states only while some gradient has not changed: a sampler can draw the same
    # sample under two states by chance.
    others = []
    for seed in (98765, *range(2000, 2000 + PROBES)):
        others.append(grad_at(seed))
        if all(any(not close(x, o[t], 0, 0) for o in others) for t, x in enumerate(first)):
            break
    declared_noise = None
    estimator = _random_estimators(session)
    for t, (label, a, same) in enumerate(zip(subject.labels, first, again)):
        b = next((o[t] for o in others if not close(a, o[t], 0, 0)), others[0][t])
        # Differs under the same state too: plain nondeterminism (the robustness check's job).
        # Differs in the last bits only: summation order (atomic adds), not fresh noise.
        if not close(a, b, 0, 0) and close(a, same, 0, 0) \
                and not rounding_only(a, b, session.settings.eps):
            if label in estimator:
                continue  # the gradients check's undeclared-estimator finding says it
            if session.options.unbiased:
                findings.append(Finding(
                    "random-backward", "info",
                    f"the gradient of {label} draws random numbers at backward time, as "
                    "declared (unbiased=True); it was judged by the mean of its draws",
                    "nothing to fix", NAME, label))
                continue
            if declared_noise is None:
                declared_noise = declared.uses_rng(session)
            if declared_noise:
                findings.append(Finding(
                    "random-backward", "info",
                    f"the gradient of {label} draws random numbers at backward time, as the "
                    "declared intended= gradient does; it was compared draw for draw from "
                    "the same random state", "nothing to fix", NAME, label))
                continue
            findings.append(Finding(
                "fresh-noise-in-backward", "error",
                f"the gradient of {label} depends on the random state at backward time "
                f"(max difference {max_diff(_z(a, b), _z(b, a)):.3g} between two states): "
                "backward draws new noise instead of reusing the forward's",
                "save the mask/noise drawn in forward (ctx.save_for_backward(mask)) or save "
                "the generator state and replay it; never call torch.rand* in backward", NAME,
                label))
    return findings


def _random_estimators(session: Session) -> set[str]:
    """Inputs an undeclared-estimator finding already calls a random backward."""
    found = set()
    for f in session.report.findings:
        if f.code == "undeclared-estimator":
            found |= {label for label, kind in f.details.get("estimator", {}).items()
                      if kind in ("sampled", "random")}
    return found


def _z(a, b):
    return torch.zeros_like(b) if a is None else a
