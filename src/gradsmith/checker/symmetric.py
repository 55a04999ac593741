"""Symmetric-matrix inputs: compare gradients along symmetric directions.

A Function of a symmetric matrix that reads it through ``torch.linalg.eigh`` (``eigvalsh``,
``cholesky``) reads one triangle only, and by the convention of ``eigh``'s own backward its
gradient is meant for symmetric perturbations: ``sym_logm``'s Daleckii-Krein backward returns
a symmetric matrix. Finite differences that move one entry at a time find the whole
derivative on the read triangle and 0 on the other, so a correct backward disagreed with
them everywhere off the diagonal.

Where an input is a symmetric matrix (batch) and forward's output does not change at all
(bit for bit) when the strictly-other triangle is moved, while it does change when the read
one is, the analytic gradient ``G`` is folded onto the read triangle (``G_ij + G_ji`` below
the diagonal, ``G_ii`` on it, 0 above): its inner product with any perturbation of the read
triangle is then the directional derivative along the symmetric direction ``E_ij + E_ji``,
which is exactly what the one-entry finite difference measures. A backward wrong along
symmetric directions (a missing factor, a wrong formula, a transposed eigenvector matrix)
changes the fold and still fails; only differences invisible to every symmetric
perturbation (which half of an off-diagonal pair carries the gradient) are ignored. Only a
gradient in one of the conventions (symmetric, or 0 on one strict triangle) is folded: any
other is compared entry by entry, as before (a ``tril(X) @ w`` whose backward forgot the
mask is then diagnosed as that), unless the code itself says the input is a symmetric matrix
(a docstring, a symmetric-matrix formula: what :mod:`gradsmith.discovery` synthesises a
symmetric input for): its contract is then symmetric inputs, and a backward correct along
every symmetric direction is correct whatever split it gives an off-diagonal pair
(peps-torch's ``SYMEIG`` returns ``U (diag(dD) + F o U^T dU) U^T``, not symmetric).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from gradsmith.checker import diagonal, eigenvectors
from gradsmith.checker.problem import Problem
from gradsmith.checker.report import Finding

#: Size of the test perturbation relative to the matrix's largest entry.
NUDGE = 0.1


def read_triangles(problem: Problem, seed: int = 0) -> dict[int, str]:
    """Input index -> ``"lower"`` or ``"upper"``: the triangle forward reads, for every
    symmetric square input of which forward reads one triangle only."""
    found: dict[int, str] = {}
    f0 = None
    for t, x in enumerate(problem.xs):
        if not _symmetric(problem, t, x):
            continue
        if f0 is None:
            f0 = problem.value().to(torch.float64)
            if not bool(torch.isfinite(f0).all()):
                return found
        gen = torch.Generator().manual_seed(seed + t)
        noise = torch.rand(x.shape, generator=gen, dtype=torch.float64).to(x.dtype) + 0.5
        noise = noise * NUDGE * max(float(x.abs().max()), 1.0)
        upper, lower = torch.triu(noise, 1), torch.tril(noise, -1)
        for side, unread, read in (("lower", upper, lower), ("upper", lower, upper)):
            if _unchanged(problem, t, unread, f0) and not _unchanged(problem, t, read, f0):
                found[t] = side
                break
    return found


def _symmetric(problem: Problem, t: int, x: torch.Tensor) -> bool:
    if (t in problem.complex_inputs or not x.is_floating_point() or x.dim() < 2
            or x.shape[-1] != x.shape[-2] or x.shape[-1] < 2 or x.numel() == 0
            or not bool(torch.isfinite(x).all())):
        return False
    tol = 100 * torch.finfo(x.dtype).eps * max(float(x.abs().max()), 1.0)
    return bool(((x - x.mT).abs() <= tol).all())


def _unchanged(problem: Problem, t: int, delta: torch.Tensor, f0: torch.Tensor) -> bool:
    """Whether forward's output is bit for bit the same with input ``t`` moved by ``delta``;
    a forward that raises on the moved input counts as changed."""
    try:
        return torch.equal(problem.shifted(t, delta).to(torch.float64), f0)
    except Exception:  # noqa: BLE001 - user code may raise anything
        return False


def conventional(grads: list[list[torch.Tensor]], sides: dict[int, str],
                 meant: Callable[[], set[int]] = set) -> dict[int, str]:
    """Those of ``sides`` whose analytic gradient, on every direction, follows one of the
    conventions of a gradient meant for symmetric perturbations: symmetric (eigh's own) or 0
    on one strict triangle, or that ``meant()`` (asked only when one does not) says the code
    calls a symmetric matrix. Any other (``g w^T`` from ``tril(X) @ w`` with its mask
    forgotten) is compared entry by entry, where its mistake has a sharper diagnosis."""
    kept = {t: side for t, side in sides.items()
            if all(_follows(per_v[t]) for per_v in grads)}
    if len(kept) < len(sides):
        symmetric_by_code = meant()
        kept.update({t: s for t, s in sides.items() if t in symmetric_by_code})
    return dict(sorted(kept.items()))


def meant_symmetric(cls: type | None, labels: list[str]) -> set[int]:
    """Indices of the inputs that the code of Function ``cls`` calls a symmetric matrix (a
    docstring, ``eigh``-style linear algebra: the structure the input synthesis reads, see
    :func:`gradsmith.discovery.hints.forward_hints`), matched by parameter name."""
    forward = getattr(cls, "forward", None)
    if forward is None:
        return set()
    from gradsmith.discovery.formula_domains import read_formula_domains
    from gradsmith.discovery.hints import forward_hints

    names = sorted(set(labels))
    try:
        hints = forward_hints(forward, names, owner=cls)
        read_formula_domains(forward, cls, hints)
    except Exception:  # noqa: BLE001 - reading source is best effort (no source, odd code)
        return set()
    return {t for t, label in enumerate(labels)
            if hints.get(label) is not None and hints[label].matrix in _SYMMETRIC}


def meant_of(session, labels: list[str]) -> set[int]:
    """:func:`meant_symmetric` for the session's Function, read from its source once a check
    (the contract step and the gradient comparison both ask)."""
    key = "meant_symmetric:" + ",".join(labels)
    if key not in session.cache:
        session.cache[key] = meant_symmetric(session.function_cls, labels)
    return session.cache[key]


#: The structures :mod:`gradsmith.discovery` reads off the code that mean "symmetric matrix".
_SYMMETRIC = ("symmetric", "spd", "negdef")


def _follows(g: torch.Tensor) -> bool:
    g = g.detach()
    if not g.is_floating_point() or not bool(torch.isfinite(g).all()):
        return True  # NaN/inf gradients are reported as such, folded or not
    tol = torch.finfo(g.dtype).eps ** 0.5 * max(float(g.abs().max()), 1e-300)
    return (bool(((g - g.mT).abs() <= tol).all()) or bool((torch.triu(g, 1) == 0).all())
            or bool((torch.tril(g, -1) == 0).all()))


def fold(grads: list[list[torch.Tensor]], sides: dict[int, str]) -> list[list[torch.Tensor]]:
    """Each direction's gradients with those of ``sides``' inputs folded onto their read
    triangle (``G + G^T`` off the diagonal, ``G`` on it, 0 on the unread triangle)."""
    if not sides:
        return grads
    return [[_fold(g, sides[t]) if t in sides else g for t, g in enumerate(per_v)]
            for per_v in grads]


def _fold(g: torch.Tensor, side: str) -> torch.Tensor:
    both = g + g.mT
    off = torch.tril(both, -1) if side == "lower" else torch.triu(both, 1)
    return off + torch.diag_embed(torch.diagonal(g, dim1=-2, dim2=-1))


def finding(problem: Problem, sides: dict[int, str], check: str) -> list[Finding]:
    """One info finding per folded input: the row says how its gradient was compared."""
    return [Finding(
        "symmetric-directions", "info",
        f"{problem.labels[t]} is a symmetric matrix of which forward reads only the "
        f"{side} triangle (moving the other one leaves the output unchanged, as with "
        "torch.linalg.eigh): gradients were compared along symmetric directions "
        "(E_ij + E_ji), the analytic gradient folded onto that triangle",
        "nothing to fix; a backward that returns the symmetric gradient (eigh's convention) "
        "or one on the read triangle both pass, one wrong along a symmetric direction fails",
        check, problem.labels[t], {"triangle": side}) for t, side in sorted(sides.items())]


def contracted(session, problem: Problem) -> Problem:
    """``problem`` with each input the code calls a symmetric matrix, whose value is one and of
    which forward reads both triangles, handed to forward as ``tril(X) + tril(X, -1)^T``: forward
    then reads one triangle, and the gradients are compared along symmetric directions like an
    ``eigh`` input's (:func:`read_triangles`). A Newton-Schulz square root written for symmetric
    matrices may return the transpose of the unrestricted gradient; along every symmetric
    direction it is exact, and a perturbation off the symmetric matrices is outside its
    contract. The base point is unchanged (the input is symmetric); ``problem`` itself when no
    input qualifies. Diagonal-matrix inputs are first restricted likewise (see
    :mod:`~gradsmith.checker.diagonal`), and eigenvector-matrix inputs are compared along the
    directions that keep them orthonormal (see :mod:`~gradsmith.checker.eigenvectors`)."""
    problem = eigenvectors.contracted(session, diagonal.contracted(session, problem))
    square = [t for t, x in enumerate(problem.xs) if _symmetric(problem, t, x)]
    if not square:
        return problem
    meant = meant_of(session, problem.labels)
    chosen = [t for t in square if t in meant and t not in read_triangles(problem)]
    if not chosen:
        return problem

    def f(xs, fresh):
        xs = list(xs)
        for t in chosen:
            xs[t] = torch.tril(xs[t]) + torch.tril(xs[t], -1).mT
        return problem.f(xs, set(fresh) | set(chosen))

    return Problem(f, problem.xs, problem.labels, problem._out_labels,
                   accumulate=problem.accumulate, complex_inputs=problem.complex_inputs,
                   complex_outputs=problem.complex_outputs, backward_seed=problem.backward_seed)
