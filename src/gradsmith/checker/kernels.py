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
from gradsmith.checker.report import Finding
from gradsmith.checker.session import Session, Skip

__all__ = ["applies", "interpreted", "launched", "kernel_backward", "kernel_double_backward", "launches"]


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


def kernel_backward(session: Session, findings: list[Finding]) -> list[Finding]:
    """One finding, instead of a double-backward mismatch per input, when backward launches
    Triton kernels and is not ``@once_differentiable``.

    Autograd cannot see inside a kernel: the gradient backward returns carries no graph, so
    double backward silently yields zeros (or partial terms) instead of raising. The
    mismatches per input (already demonstrated by finite differences) all have that cause.
    """
    mismatches = [f for f in findings if f.code == "double-backward-mismatch"]
    if not mismatches or not launches_in_backward(session):
        return findings
    inputs = [f.input for f in mismatches if f.input]
    rest = [f for f in findings if f.code != "double-backward-mismatch"]
    return rest + [Finding(
        "double-backward-mismatch", "error",
        "backward launches Triton kernels and is not @once_differentiable: autograd cannot "
        "differentiate through a kernel, so the gradient backward returns has no graph and "
        "its second derivative is silently wrong instead of an error (finite differences of "
        f"backward disagree for {', '.join(inputs)}; e.g. {mismatches[0].message})",
        "decorate backward with @once_differentiable (double backward then raises a clear "
        "error), or give the kernel's backward a Function of its own with a backward",
        "second_order", None, {"inputs": inputs, "cause": "kernel-backward"})]


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
    ``@once_differentiable``: one directional finite difference of backward's result (two
    backward runs) against autograd's derivative of it. Interpreted kernels make the full
    element-by-element comparison cost minutes, for findings that all share this one cause.

    Args:
        session: the check's session.
        problem: the second-order problem ``(x, v) -> J(x)^T v``.

    Returns:
        The finding when the two disagree; None to run the full comparison (no kernel in
        backward, or the derivative agrees: the kernel's result does carry a graph).
    """
    if not launches_in_backward(session):
        return None
    s = session.settings
    gen = session.generator(29)
    us = [torch.randn(x.shape, generator=gen, dtype=torch.float64).to(x.dtype)
          for x in problem.xs]
    w = torch.randn(problem.m, generator=gen, dtype=torch.float64).to(problem.xs[0].dtype)
    plus = problem.value([x + s.h * u for x, u in zip(problem.xs, us)])
    minus = problem.value([x - s.h * u for x, u in zip(problem.xs, us)])
    numerical = float((w.double() * (plus.double() - minus.double())).sum()) / (2 * s.h)
    analytic = float(sum((g.double() * u.double()).sum()
                         for g, u in zip(problem.vjp(w), us)))
    if abs(analytic - numerical) <= 10 * s.atol + 10 * s.rtol * abs(numerical):
        return None
    return [Finding(
        "double-backward-mismatch", "error",
        "backward launches Triton kernels and is not @once_differentiable: autograd cannot "
        "differentiate through a kernel, so the gradient backward returns has no graph and "
        "its second derivative is silently wrong instead of an error (along a random "
        f"direction: autograd {analytic:.6g}, finite differences of backward "
        f"{numerical:.6g})",
        "decorate backward with @once_differentiable (double backward then raises a clear "
        "error), or give the kernel's backward a Function of its own with a backward",
        "second_order", None, {"cause": "kernel-backward", "analytic": analytic,
                               "numerical": numerical})]
