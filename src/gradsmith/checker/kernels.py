"""Findings about Triton kernels a Function launched: they ran in Triton's interpreter.

Verdicts on interpreted kernels hold for the kernels' code as Triton's interpreter runs it
(numpy, on CPU): the arithmetic, indexing, masking and the host code around the launches. They
say nothing about what a GPU compiler does differently (fast-math, tensor-core precision, race
conditions between programs), and the deployment columns that measure the device say n/a.
"""

from __future__ import annotations

from typing import Any

import torch

from gradsmith._triton import all_launches, interpreting, launches, status
from gradsmith.checker import unsupported
from gradsmith.checker.report import Finding
from gradsmith.checker.session import Session, Skip

__all__ = ["applies", "backward_cause", "interpreted", "launched", "kernel_double_backward",
           "launches"]


# Deployment checks that measure what a GPU compiler and device do with the kernels: with the
# kernels interpreted they would describe numpy (dynamo tracing the interpreter, CPU bfloat16
# in numpy, which the interpreter gets wrong), not the deployment. float32, checkpoint and
# torch.func stay: they test the Function's own code, which the interpreter runs faithfully.
_DEVICE_ONLY = {
    "compile": "torch.compile would trace Triton's interpreter (numpy), not compiled kernels",
    "export": "torch.export would trace Triton's interpreter (numpy), not compiled kernels",
    "autocast": "low-precision autocast in Triton's interpreter is not what a GPU computes "
                "(its bfloat16 arithmetic is unreliable)",
}


def applies(check: str, session: Session) -> None:
    """Raise :class:`Skip` (n/a in the matrix, with why) for a deployment check that cannot
    say anything about a Function whose kernels ran interpreted."""
    if check in _DEVICE_ONLY and launched(session):
        raise Skip(f"n/a: the Function's Triton kernels ran interpreted (no GPU here): "
                   f"{_DEVICE_ONLY[check]}; check on a GPU for this column")


def launched(session: Session) -> bool:
    """Whether the Function has launched interpreted Triton kernels in this check so far."""
    return launches() > session.cache.get("kernels:before", launches())


def interpreted(before: int) -> list[Finding]:
    """An info finding when Triton kernels were launched (through the interpreter) since
    ``before`` (a :func:`launches` count)."""
    count = launches() - before
    if count <= 0:
        return []
    info = status()
    shims = [name for name, state in dict(info["shims"]).items() if state == "applied"]
    return [Finding(
        "triton-interpreted", "info",
        f"{count} Triton kernel launch(es) ran in Triton {info['triton']}'s interpreter "
        "(TRITON_INTERPRET=1: numpy on CPU, no GPU here), with gradsmith's shims for its gaps "
        f"({', '.join(shims) or 'none needed'}): the verdicts hold for the kernels' code, not "
        "for what a GPU compiler makes of it",
        "run gradsmith check on a machine with a GPU to check the compiled kernels too",
        "setup", details={"launches": count, "triton": info["triton"], "shims": shims})]


#: Why double backward misses a dependence when backward launches kernels.
KERNEL_CAUSE = ("backward launches Triton kernels and is not @once_differentiable: autograd "
                "cannot differentiate through a kernel, so the gradient backward returns has "
                "no graph")


def backward_cause(session: Session) -> str | None:
    """:data:`KERNEL_CAUSE` when backward launches Triton kernels, else None."""
    return KERNEL_CAUSE if launches_in_backward(session) else None


def launches_in_backward(session: Session) -> int:
    """Triton kernel launches, interpreted or native, during one backward of the Function (0
    without Triton)."""
    if "kernels:backward" not in session.cache:
        count = 0
        if all_launches() or interpreting():
            problem = session.problem
            try:
                problem.linearize()
                before = all_launches()
                # Not ones: fused losses skip their kernel when grad_output is exactly 1.
                problem.vjp(torch.full((problem.m,), 0.75, dtype=problem.xs[0].dtype))
                count = all_launches() - before
            except Exception:  # noqa: BLE001 - backward errors are reported elsewhere
                count = 0
        session.cache["kernels:backward"] = count
    return session.cache["kernels:backward"]


def kernel_double_backward(session: Session, problem: Any) -> list[Finding] | None:
    """A cheap demonstration for a backward that launches Triton kernels and is not
    ``@once_differentiable``: directional finite differences of backward's result (two
    backward runs, then two per input when they disagree) against autograd's derivative of
    it. Interpreted kernels make the full element-by-element comparison cost minutes, for
    findings that all share this one cause.

    Args:
        session: the check's session.
        problem: the second-order problem ``(x, v) -> J(x)^T v``.

    Returns:
        One ``double-backward-unsupported`` warning naming the inputs for which autograd's
        derivative is exactly 0 while finite differences are not (the kernel's result has
        no graph: "zero") and those where it is non-zero and disagrees (autograd sees part
        of backward's dependence: "partial", see :mod:`unsupported`); None to run the full
        comparison (no kernel in backward, or the derivatives agree).
    """
    if not launches_in_backward(session):
        return None
    s = session.settings
    gen = session.generator(29)
    us = [torch.randn(x.shape, generator=gen, dtype=torch.float64).to(x.dtype)
          for x in problem.xs]
    w = torch.randn(problem.m, generator=gen, dtype=torch.float64).to(problem.xs[0].dtype)
    grads = problem.vjp(w)

    def along(moved: list[int]) -> tuple[float, float]:
        """(autograd, finite differences) along ``us`` restricted to inputs ``moved``."""
        step = [s.h * u if t in moved else torch.zeros_like(u) for t, u in enumerate(us)]
        plus = problem.value([x + d for x, d in zip(problem.xs, step)])
        minus = problem.value([x - d for x, d in zip(problem.xs, step)])
        numerical = float((w.double() * (plus.double() - minus.double())).sum()) / (2 * s.h)
        analytic = float(sum((grads[t].double() * us[t].double()).sum() for t in moved))
        return analytic, numerical

    def agree(a: float, n: float) -> bool:
        return abs(a - n) <= 10 * s.atol + 10 * s.rtol * abs(n)

    if agree(*along(list(range(len(us))))):
        return None
    zero, partial = [], []
    for t, label in enumerate(problem.labels):
        a, n = along([t])
        if not agree(a, n):
            (partial if bool(grads[t].any()) else zero).append((label, a, n))
    if not zero and not partial:
        return None
    label, a, n = (zero + partial)[0]
    return [unsupported.finding(
        session, [x[0] for x in zero],
        f"along a random direction of {label}: autograd {a:.6g}, finite differences of "
        f"backward {n:.6g}", KERNEL_CAUSE, {"cause": "kernel-backward", "analytic": a,
                                            "numerical": n}, in_message=True,
        partial=[x[0] for x in partial])]
