"""Gauge-dependent outputs: singular and eigen vectors compared with their sign/phase fixed.

An eigenvector or singular vector is defined up to its sign (a phase, for complex ones):
``torch.linalg.svd`` of a ``(5, 2)`` matrix may return ``-u_k`` after a perturbation of
``1e-6`` that leaves ``u_k`` itself almost unchanged. A central finite difference across
such a flip is ``2 u_k / 2h``, about ``1e6`` (issue 18: a correct SVD backward called a
``gradient-mismatch``, numerical 1.4e6), and a complex cotangent with a component along the
phase direction asks for a derivative that does not exist (torch's own ``eig`` backward
raises on it).

Where forward returns a matrix (batch) with orthonormal columns (``X^H X = I``: ``U``, the
eigenvectors) or orthonormal rows (``X X^H = I``: ``Vh``), both sides are compared through
outputs aligned to the base point's: each column (row) is multiplied by the conjugate phase
of its overlap with the base one, ``x_k c_k^* / |c_k|`` with ``c_k = <x0_k, x_k>``, inside
the compared function, so the finite differences never see a flip and the analytic side
goes through the same alignment (torch's linalg tests compare through gauge-invariant
losses likewise). For real outputs the factor is a locally constant sign: the compared
derivative is the plain one and nothing about backward is hidden. For complex ones the
alignment removes exactly the phase direction of each vector, the one no backward can be
right about; every other direction is compared as before, so a backward wrong along any
of them (a missing term, a transposed factor, a sign) still fails. A real square orthogonal
output may have flipped a column (``U``) or a row (``Vh``): of the two alignments the one
nearest the base value is compared (both are the output itself where nothing flipped); a
complex square one is aligned by columns, the eigenvectors' gauge (the rows of a complex
``Vh`` are not: compare such an SVD through ``U @ Vh``).
"""

from __future__ import annotations

import torch

from gradsmith.checker.problem import Problem
from gradsmith.checker.report import Finding


def orthonormal_axes(problem: Problem) -> dict[int, tuple[str, ...]]:
    """Output index -> the axes (``"columns"``, ``"rows"``) along which its base value is
    orthonormal, for outputs that are (batches of) matrices with at least 2 vectors."""
    found: dict[int, tuple[str, ...]] = {}
    try:
        outs = _outputs(problem)
    except Exception:  # noqa: BLE001 - user code may raise anything; compared as before
        return found
    for k, out in enumerate(outs):
        z = _as_matrix(problem, k, out)
        if z is None:
            continue
        axes = tuple(axis for axis in ("columns", "rows") if _orthonormal(z, axis))
        if axes:
            found[k] = axes
    return found


def _outputs(problem: Problem) -> list[torch.Tensor]:
    with torch.no_grad():
        return [o.detach() for o in problem.f(list(problem.xs), set())]


def _as_matrix(problem: Problem, k: int, out: torch.Tensor) -> torch.Tensor | None:
    """The output as the matrix it stands for (complex outputs come as real views)."""
    if k in problem.complex_outputs:
        if out.dim() < 1 or out.shape[-1] != 2 or not out.is_floating_point():
            return None
        out = torch.view_as_complex(out.contiguous())
    if not (out.is_floating_point() or out.is_complex()) or out.dim() < 2:
        return None
    if out.shape[-1] < 2 and out.shape[-2] < 2 or out.numel() == 0:
        return None
    if not bool(torch.isfinite(torch.view_as_real(out) if out.is_complex() else out).all()):
        return None
    return out


def _orthonormal(z: torch.Tensor, axis: str) -> bool:
    m, n = z.shape[-2], z.shape[-1]
    if (axis == "columns" and (n > m or n < 2)) or (axis == "rows" and (m > n or m < 2)):
        return False
    gram = z.mH @ z if axis == "columns" else z @ z.mH
    eye = torch.eye(gram.shape[-1], dtype=gram.dtype)
    real = z.real if z.is_complex() else z
    tol = 100 * torch.finfo(real.dtype).eps ** 0.5
    return bool(((gram - eye).abs() <= tol).all())


def aligned(problem: Problem, axes: dict[int, tuple[str, ...]]) -> Problem:
    """``problem`` whose outputs in ``axes`` are aligned, vector by vector, to their base
    values (see the module docstring); ``problem`` itself when ``axes`` is empty."""
    if not axes:
        return problem
    base = _outputs(problem)

    def f(xs, fresh):
        outs = list(problem.f(xs, fresh))
        for k, kinds in axes.items():
            outs[k] = _align(problem, k, outs[k], base[k], kinds)
        return outs

    return Problem(f, problem.xs, problem.labels, problem._out_labels,
                   accumulate=problem.accumulate, complex_inputs=problem.complex_inputs,
                   complex_outputs=problem.complex_outputs, backward_seed=problem.backward_seed)


def _align(problem: Problem, k: int, out: torch.Tensor, base: torch.Tensor,
           kinds: tuple[str, ...]) -> torch.Tensor:
    packed = k in problem.complex_outputs
    z = torch.view_as_complex(out.contiguous()) if packed else out
    z0 = torch.view_as_complex(base.contiguous()) if packed else base
    if z.is_complex():  # a square one: its columns (eigenvectors, U), see the docstring
        z = _phased(z, z0, kinds[0])
        return torch.view_as_real(z) if packed else z
    # real: a flip is a sign, and only one axis carries it (U's columns, Vh's rows): the
    # candidate nearest the base point (every candidate is z itself where nothing flipped)
    candidates = [_phased(z, z0, kind) for kind in kinds]
    return min(candidates, key=lambda c: float((c.detach() - z0).abs().max()))


def _phased(z: torch.Tensor, z0: torch.Tensor, kind: str) -> torch.Tensor:
    """``z`` with each column (row) times the conjugate phase of its overlap with ``z0``'s."""
    dim = -2 if kind == "columns" else -1  # summed over: a column's entries are dim -2
    overlap = (z0.conj() * z).sum(dim, keepdim=True)
    if not z.is_complex():
        return z * torch.where(overlap < 0, -1.0, 1.0).to(z.dtype).detach()
    size = overlap.abs().clamp_min(torch.finfo(overlap.real.dtype).tiny)
    return z * (overlap / size).conj()


def finding(problem: Problem, axes: dict[int, tuple[str, ...]], check: str) -> list[Finding]:
    """One info finding per aligned output: the row says how it was compared."""
    names = problem._out_labels or [f"out[{k}]" for k in range(max(axes, default=0) + 1)]
    return [Finding(
        "gauge-aligned", "info",
        f"{names[k]} has orthonormal {' and '.join(kinds)} (singular or eigen "
        "vectors, defined up to a sign or phase each): finite differences and backward were "
        "compared through it with each vector's sign/phase aligned to the base point's, so a "
        "sign flip between nearby inputs is not read as a derivative",
        "nothing to fix; a backward wrong along any direction but a vector's own phase "
        "still fails", check, None, {"output": names[k], "axes": list(kinds)})
        for k, kinds in sorted(axes.items())]
