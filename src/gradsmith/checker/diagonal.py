"""Diagonal-matrix inputs: compare gradients along diagonal directions.

A Function whose contract is a diagonal matrix (an eigenvalue matrix ``diag(lambda)``: see
:mod:`gradsmith.discovery.diagonals`, which reads it off a backward that returns
``diag_embed(...)`` for the input) need not be defined off the diagonal: DifferentiableSVD's
``Power`` takes ``sqrt`` of the whole matrix, NaN as soon as a finite difference moves an
off-diagonal zero, and its backward returns only the diagonal's gradient.

Where the code says an input is a diagonal matrix and its value is one (every entry off the
diagonal exactly 0), forward is handed ``diag_embed(diagonal(X))``: the base point is
unchanged, a perturbation off the diagonal leaves the output unchanged, and the analytic
gradient becomes the diagonal of backward's. A backward wrong on the diagonal (a missing
factor, a wrong power) still fails; only what it returns off the diagonal, outside the
contract, is ignored.
"""

from __future__ import annotations

import torch

from gradsmith.checker.problem import Problem


def meant_diagonal(session, labels: list[str]) -> set[int]:
    """Indices of the inputs that the session's Function's code builds a diagonal gradient
    for, read from its source once a check."""
    key = "meant_diagonal:" + ",".join(labels)
    if key not in session.cache:
        session.cache[key] = _read(session.function_cls, labels)
    return session.cache[key]


def _read(cls: type | None, labels: list[str]) -> set[int]:
    forward = getattr(cls, "forward", None)
    if forward is None:
        return set()
    from gradsmith.discovery.hints import forward_hints

    try:
        hints = forward_hints(forward, sorted(set(labels)), owner=cls)
    except Exception:  # noqa: BLE001 - reading source is best effort (no source, odd code)
        return set()
    return {t for t, label in enumerate(labels)
            if hints.get(label) is not None and hints[label].matrix == "diagonal"}


def _diagonal(problem: Problem, t: int, x: torch.Tensor) -> bool:
    if (t in problem.complex_inputs or not x.is_floating_point() or x.dim() < 2
            or x.shape[-1] != x.shape[-2] or x.shape[-1] < 2 or x.numel() == 0):
        return False
    return bool((x - torch.diag_embed(torch.diagonal(x, dim1=-2, dim2=-1)) == 0).all())


def contracted(session, problem: Problem) -> Problem:
    """``problem`` with each input the code calls a diagonal matrix, whose value is one,
    handed to forward as ``diag_embed(diagonal(X))``; ``problem`` itself when none is."""
    candidates = [t for t, x in enumerate(problem.xs) if _diagonal(problem, t, x)]
    if not candidates:
        return problem
    meant = meant_diagonal(session, problem.labels)
    chosen = [t for t in candidates if t in meant]
    if not chosen:
        return problem

    def f(xs, fresh):
        xs = list(xs)
        for t in chosen:
            xs[t] = torch.diag_embed(torch.diagonal(xs[t], dim1=-2, dim2=-1))
        return problem.f(xs, set(fresh) | set(chosen))

    return Problem(f, problem.xs, problem.labels, problem._out_labels,
                   accumulate=problem.accumulate, complex_inputs=problem.complex_inputs,
                   complex_outputs=problem.complex_outputs, backward_seed=problem.backward_seed)
