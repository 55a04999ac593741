"""Eigenvector-matrix inputs: compare gradients along directions that keep them orthonormal.

A Function that takes an eigenpair ``(vals, vecs)`` (see :mod:`gradsmith.discovery.eigenpairs`:
it rebuilds ``vecs diag(vals) vecs^H``) is written for ``vecs`` orthonormal (unitary), and its
backward returns the gradient of ``vecs`` in the tangent space there: ``V (Delta o V^H G V)``
is the derivative along every ``dV = V K`` with ``K`` anti-symmetric (anti-Hermitian), not
along a move that makes ``V`` non-orthogonal, which is outside the contract.

Where the code says an input is an eigenvector matrix and its value is orthonormal, forward
is handed ``P(V) = V (3 I - V^H V) / 2``: the base point is unchanged (``P(V) = V`` for a
unitary ``V``) and ``P``'s derivative there is the projection onto the tangent space,
``dV -> V skew(V^H dV)``. Finite differences and backward (through ``P``'s autograd) then
both measure the derivative along tangent directions; a backward wrong along them (a missing
conjugate, a transposed ``Delta``, a wrong eigenvalue term) still fails, and only its
component off the tangent space, outside the contract, is ignored.
"""

from __future__ import annotations

import torch

from gradsmith.checker.problem import Problem
from gradsmith.checker.report import Finding


def meant_eigenvectors(session, labels: list[str]) -> dict[int, str]:
    """Input index -> ``"eigenvectors"`` (the code uses it as an eigenvector matrix beside its
    eigenvalues) or ``"unitary"`` (its docstrings call it unitary), read once a check."""
    key = "meant_eigenvectors:" + ",".join(labels)
    if key not in session.cache:
        session.cache[key] = _read(session.function_cls, labels)
    return session.cache[key]


def _read(cls: type | None, labels: list[str]) -> dict[int, str]:
    """Eigenvector matrices beside their eigenvalues, and every input of a Function whose
    docstrings call its input unitary (only those whose value is unitary are restricted)."""
    from gradsmith.discovery.complex_matrices import says_unitary
    from gradsmith.discovery.eigenpairs import eigenpairs

    try:
        pairs = eigenpairs(cls, sorted(set(labels)))
        unitary = cls is not None and says_unitary(cls)
    except Exception:  # noqa: BLE001 - reading source is best effort (no source, odd code)
        return {}
    return {t: "eigenvectors" if label in pairs else "unitary" for t, label in enumerate(labels)
            if label in pairs or unitary}


def _orthonormal(problem: Problem, t: int, x: torch.Tensor) -> bool:
    if t in problem.complex_inputs:  # handled as its real view (..., 2)
        if x.dim() < 3 or x.shape[-1] != 2 or not x.is_floating_point():
            return False
        x = torch.view_as_complex(x.contiguous())
    elif not x.is_floating_point():
        return False
    if x.dim() < 2 or x.shape[-1] != x.shape[-2] or x.shape[-1] < 2 or x.numel() == 0:
        return False
    real = x.real if x.is_complex() else x
    eye = torch.eye(x.shape[-1], dtype=x.dtype)
    tol = 100 * torch.finfo(real.dtype).eps ** 0.5
    return bool(((x.mH @ x - eye).abs() <= tol).all())


def project(x: torch.Tensor, packed: bool = False) -> torch.Tensor:
    """``V (3 I - V^H V) / 2``: ``V`` itself for a unitary ``V``, and to first order the
    projection of a move onto the tangent space there. ``packed``: ``x`` is a complex
    matrix's real view ``(..., n, n, 2)``."""
    v = torch.view_as_complex(x.contiguous()) if packed else x
    eye = torch.eye(v.shape[-1], dtype=v.dtype)
    out = v @ (3 * eye - v.mH @ v) / 2
    return torch.view_as_real(out) if packed else out


def contracted(session, problem: Problem) -> Problem:
    """``problem`` with each eigenvector-matrix input, whose value is orthonormal, handed to
    forward through :func:`project`; ``problem`` itself when none is."""
    candidates = [t for t, x in enumerate(problem.xs) if _orthonormal(problem, t, x)]
    if not candidates:
        return problem
    meant = meant_eigenvectors(session, problem.labels)
    # a unitary input by its docstring: only of a decomposition (values and vectors out); a
    # Riemannian-gradient estimator of an identity forward on SU(n) is not restricted so
    decomposed = len(problem._out_labels or []) >= 2
    chosen = [t for t in candidates if t in meant and (meant[t] != "unitary" or decomposed)]
    if not chosen:
        return problem
    session.cache["eigenvector_inputs"] = [(problem.labels[t], meant[t]) for t in chosen]

    def f(xs, fresh):
        xs = list(xs)
        for t in chosen:
            xs[t] = project(xs[t], t in problem.complex_inputs)
        return problem.f(xs, set(fresh) | set(chosen))

    return Problem(f, problem.xs, problem.labels, problem._out_labels,
                   accumulate=problem.accumulate, complex_inputs=problem.complex_inputs,
                   complex_outputs=problem.complex_outputs, backward_seed=problem.backward_seed)


def finding(session, check: str) -> list[Finding]:
    """One info finding per orthonormal input compared along its tangent directions."""
    said = {"eigenvectors": "a matrix of orthonormal eigenvectors (the code rebuilds a matrix "
                            "from it and its eigenvalues)",
            "unitary": "a unitary matrix (the Function's docstring calls its input unitary)"}
    return [Finding(
        "eigenvector-directions", "info",
        f"{label} is {said[kind]}: gradients were compared along directions that keep it "
        "orthonormal (V K, K anti-symmetric / anti-Hermitian), the contract its backward is "
        "written for", "nothing to fix; a backward wrong along such a direction still fails",
        check, label, {"kind": kind})
        for label, kind in session.cache.get("eigenvector_inputs", [])]
