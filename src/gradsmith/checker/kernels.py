"""Findings about Triton kernels a Function launched: they ran in Triton's interpreter.

Verdicts on interpreted kernels hold for the kernels' code as Triton's interpreter runs it
(numpy, on CPU): the arithmetic, indexing, masking and the host code around the launches. They
say nothing about what a GPU compiler does differently (fast-math, tensor-core precision, race
conditions between programs), and the deployment columns that measure the device say n/a.
"""

from __future__ import annotations

from gradsmith._triton import launches, status
from gradsmith.checker.report import Finding

__all__ = ["interpreted", "launches"]


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
