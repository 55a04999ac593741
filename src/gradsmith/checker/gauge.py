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

#: Values closer than this (relative to the largest) are one degenerate eigen/singular value.
DEGENERATE = 1e-6

#: Output index -> the axes its vectors lie along, each with the mask of degenerate vectors
#: (None: none), see :func:`orthonormal_axes`.
Plan = dict[int, list[tuple[str, torch.Tensor | None]]]


def orthonormal_axes(problem: Problem) -> Plan:
    """Output index -> the axes (``"columns"``, ``"rows"``) along which its base value is
    orthonormal, for outputs that are (batches of) matrices with at least 2 vectors. Where
    another output is a spectrum of as many values (``S`` beside ``U`` and ``Vh``) with
    (near-)repeated ones, the vectors of a repeated value span a subspace in which any
    rotation is as valid (a rank-deficient SVD's null vectors): they have no derivative, are
    masked out of the comparison, and the others must be orthonormal."""
    found: Plan = {}
    try:
        outs = _outputs(problem)
    except Exception:  # noqa: BLE001 - user code may raise anything; compared as before
        return found
    spectra = [_degenerate(problem, k, out) for k, out in enumerate(outs)]
    for k, out in enumerate(outs):
        z = _as_matrix(problem, k, out)
        if z is None:
            continue
        axes = []
        for axis in ("columns", "rows"):
            n = z.shape[-1] if axis == "columns" else z.shape[-2]
            masks = [m for m in spectra if m is not None and m.shape == (*z.shape[:-2], n)]
            mask = next((m for m in masks if bool(m.any())), None)
            if _orthonormal(z, axis, mask):
                axes.append((axis, mask))
        if axes:
            found[k] = axes
    return found


def _degenerate(problem: Problem, k: int, out: torch.Tensor) -> torch.Tensor | None:
    """For a spectrum-like output (values along its last dimension), which values repeat."""
    if k in problem.complex_outputs:
        out = torch.view_as_complex(out.contiguous()) if out.shape[-1:] == (2,) else None
    if out is None or out.dim() < 1 or out.shape[-1] < 2 or not (
            out.is_floating_point() or out.is_complex()):
        return None
    gap = (out.unsqueeze(-1) - out.unsqueeze(-2)).abs()
    scale = out.abs().amax(-1, keepdim=True).unsqueeze(-1).clamp_min(1e-300)
    close = gap <= DEGENERATE * scale
    close &= ~torch.eye(out.shape[-1], dtype=torch.bool)
    return close.any(-1)


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


def _masked(z: torch.Tensor, axis: str, mask: torch.Tensor | None) -> torch.Tensor:
    if mask is None:
        return z
    keep = ~(mask.unsqueeze(-2) if axis == "columns" else mask.unsqueeze(-1))
    return z * keep.to(z.real.dtype if z.is_complex() else z.dtype)


def _orthonormal(z: torch.Tensor, axis: str, mask: torch.Tensor | None) -> bool:
    kept = z.shape[-1] if axis == "columns" else z.shape[-2]
    if mask is not None:
        kept -= int(mask.sum(-1).max())
    if kept < 2:
        return False
    z = _masked(z, axis, mask)
    gram = z.mH @ z if axis == "columns" else z @ z.mH
    eye = torch.eye(gram.shape[-1], dtype=gram.dtype)
    if mask is not None:
        eye = eye * (~mask).unsqueeze(-1).to(gram.dtype)
    real = z.real if z.is_complex() else z
    tol = 100 * torch.finfo(real.dtype).eps ** 0.5
    return bool(((gram - eye).abs() <= tol).all())


def aligned(problem: Problem, axes: Plan) -> Problem:
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
           kinds: list[tuple[str, torch.Tensor | None]]) -> torch.Tensor:
    packed = k in problem.complex_outputs
    z = torch.view_as_complex(out.contiguous()) if packed else out
    z0 = torch.view_as_complex(base.contiguous()) if packed else base
    for axis, mask in kinds:  # a degenerate value's vectors: no derivative, not compared
        z, z0 = _masked(z, axis, mask), _masked(z0, axis, mask)
    kinds = [axis for axis, _ in kinds]
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


def finding(problem: Problem, axes: Plan, check: str) -> list[Finding]:
    """One info finding per aligned output: the row says how it was compared."""
    names = problem._out_labels or [f"out[{k}]" for k in range(max(axes, default=0) + 1)]
    found = []
    for k, kinds in sorted(axes.items()):
        masked = sorted({int(i) for _, m in kinds if m is not None
                         for i in m.reshape(-1, m.shape[-1]).any(0).nonzero().reshape(-1)})
        skipped = (f"; the vectors {masked} belong to a repeated eigen/singular value (any "
                   "rotation among them is as valid: no derivative) and were not compared"
                   if masked else "")
        found.append(Finding(
            "gauge-aligned", "info",
            f"{names[k]} has orthonormal {' and '.join(a for a, _ in kinds)} (singular or "
            "eigen vectors, defined up to a sign or phase each): finite differences and "
            "backward were compared through it with each vector's sign/phase aligned to the "
            "base point's, so a sign flip between nearby inputs is not read as a derivative"
            + skipped,
            "nothing to fix; a backward wrong along any direction but a vector's own phase "
            "still fails", check, None,
            {"output": names[k], "axes": [a for a, _ in kinds], "degenerate": masked}))
    return found
