"""Complex normal and unitary matrices for Functions written for them (private).

A Function whose backward returns a complex gradient for the real square matrix synthesised,
while forward's outputs are complex on it (``torch.linalg.eig`` of a real matrix), is written
for complex inputs: torch_linalg_ext's ``NormalMatrixEig`` uses ``V^H`` for ``V^-1`` (a normal
matrix's eigenvectors are orthonormal), ``Eigu`` projects the eigenvalues' gradient onto the
unit circle (a unitary matrix's eigenvalues lie there). Until now such a row was a skip
saying so (see :mod:`~gradsmith.discovery.doubt`).

:func:`complex_matrices` retries those inputs with each real square matrix made a complex
normal one, ``Q diag(l) Q^H`` with ``Q`` unitary (``eigh`` of a random Hermitian matrix) and
``l`` well-separated complex eigenvalues; a unitary one (``|l| = 1``) where the Function's
docstrings call its input unitary, as ``Eigu``'s does ("specialized for unitary matrices").
The inputs are kept when forward and backward run on them. The check then compares a unitary
input along the directions that keep it unitary (``U K``, ``K`` anti-Hermitian: see
:mod:`gradsmith.checker.eigenvectors`), the contract such a backward is written for, and the
eigenvectors forward returns with their phases aligned (:mod:`gradsmith.checker.gauge`).
"""

from __future__ import annotations

import inspect
import math
import re
from typing import Any

#: The size of the matrices made: one small matrix (an eigen-decomposition's order of
#: eigenvalues is LAPACK's, and a batch of large ones only multiplies the finite differences).
MAX_SIZE = 4
_UNITARY = re.compile(r"\bunitary\b", re.IGNORECASE)
_NORMAL = re.compile(r"\bnormal\b", re.IGNORECASE)


def says_unitary(owner: Any) -> bool:
    """Whether the docstrings of Function ``owner`` (the class's, forward's) call its input a
    unitary matrix, and not a normal one (a normal matrix's docstring may say "unitarily").

    Example:
        >>> import torch
        >>> class Eigu(torch.autograd.Function):
        ...     '''Eigen-decomposition, specialized for unitary matrices.'''
        >>> says_unitary(Eigu), says_unitary(torch.autograd.Function)
        (True, False)
    """
    text = " ".join(inspect.getdoc(obj) or "" for obj in (owner, getattr(owner, "forward", None))
                    if obj is not None and (obj is not owner or "__doc__" in vars(owner)))
    return bool(_UNITARY.search(text)) and not _NORMAL.search(text)


def normal_matrix(n: int, batch: tuple[int, ...], seed: int, unitary: bool) -> Any:
    """A complex128 ``(*batch, n, n)`` matrix ``Q diag(l) Q^H``: ``Q`` unitary, ``l`` distinct,
    at least ``2 pi / (2 n)`` apart in angle (on the unit circle when ``unitary``)."""
    import torch

    generator = torch.Generator().manual_seed(seed + 11)
    a = torch.randn((*batch, n, n), dtype=torch.complex128, generator=generator)
    _, q = torch.linalg.eigh(a + a.mH)
    jitter = torch.rand((*batch, n), dtype=torch.float64, generator=generator)
    angles = -math.pi + (torch.arange(n, dtype=torch.float64) + 0.3 + 0.4 * jitter) * (
        2 * math.pi / n)
    radius = torch.ones_like(angles) if unitary else 0.5 + torch.rand(
        (*batch, n), dtype=torch.float64, generator=generator)
    values = torch.polar(radius, angles)
    return q @ torch.diag_embed(values) @ q.mH


def complex_matrices(found: Any, owner: Any, names: list[str], works,
                     seed: int = 0) -> Any | None:
    """``found`` (the real inputs backward rejected, see the module docstring) with each real
    square matrix that requires grad made complex normal (unitary), when ``works(args)``
    (forward and backward run) accepts them; None otherwise."""
    import torch

    unitary = says_unitary(owner)
    kind = ("unitary, Q diag(e^{i theta}) Q^H (its docstring calls it unitary)" if unitary
            else "normal, Q diag(l) Q^H with Q unitary and l distinct")
    args, description, changed = list(found.args), found.description, False
    for i, a in enumerate(args):
        if (isinstance(a, torch.Tensor) and a.is_floating_point() and a.requires_grad
                and a.dim() >= 2 and a.shape[-1] == a.shape[-2] and a.shape[-1] >= 2):
            args[i] = normal_matrix(min(a.shape[-1], MAX_SIZE), (), seed + i,
                                    unitary).requires_grad_()
            changed = True
            name = names[i] if i < len(names) else f"args[{i}]"
            text = (f"{name}: complex128 {tuple(args[i].shape)} {kind}: backward returns a complex "
                    "gradient for a real matrix, and forward's outputs are complex on one")
            description, hits = re.subn(rf"\b{re.escape(name)}: \w+ \([^)]*\)[^,]*",
                                        lambda _, text=text: text, description, count=1)
            description = description if hits else f"{description}, {text}"
    if not changed or not works(tuple(args)):
        return None
    return type(found)(tuple(args), description, (), found.seed)
