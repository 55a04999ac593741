"""Eigenpairs passed as two arguments: eigenvalues and a matrix of eigenvectors (private).

A Function that rebuilds a matrix from its spectral decomposition, ``vecs @ (vals.unsqueeze(-1)
* vecs.adjoint())`` or ``vecs @ diag_embed(vals) @ vecs.mT`` (the inverse of an ``eigh``), is
written for ``vecs`` orthonormal (unitary) and ``vals`` one value per eigenvector, and its
backward returns the gradient of ``vecs`` in the tangent space of the orthogonal (unitary)
matrices, ``V (Delta o V^H G V)``. Two unrelated random tensors (issue 18: torch_linalg_ext's
``InverseEign`` got ``(3, 4)`` and ``(3, 4)``) compare it off its contract: a false alarm.

Read, never run: a product in forward (or a function it passes both to) that multiplies a
parameter ``X`` by its own transpose or conjugate transpose (``X.mT``, ``X.mH``, ``X.T``,
``X.adjoint()``, ``X.transpose(-1, -2)``, ``X.conj().transpose(...)``) with another parameter
``v`` between them as a diagonal (``diag_embed(v)``, ``diag(v)``) or broadcast along one axis
(``v.unsqueeze(-1)``, ``v[..., None]``, ``v[..., None, :]``), and a backward that takes the
pairwise differences of ``v`` (``v.unsqueeze(-2) - v.unsqueeze(-1)``, here or in a helper it
passes ``v`` to: the eigenvalue gaps of an eigenvector derivative; a weighted Gram matrix
``x diag(w) x^T`` has the same forward and no such gaps): ``X`` is the eigenvector matrix,
``v`` its eigenvalues. :func:`with_eigenpairs` then gives every input set a consistent pair,
the eigen-decomposition of one random symmetric (Hermitian, for complex inputs) matrix:
distinct eigenvalues, orthonormal eigenvectors; :mod:`gradsmith.checker.eigenvectors` compares
the gradient of ``vecs`` along the directions that keep it orthonormal.
"""

from __future__ import annotations

import ast
import re
from dataclasses import replace
from typing import Any

from gradsmith.discovery.callees import followed
from gradsmith.discovery.source import call_name, parse

_PRODUCTS = {"matmul", "bmm", "mm"}
_TRANSPOSES = {"mT", "mH", "T", "H"}
_TRANSPOSE_CALLS = {"t", "transpose", "adjoint", "swapaxes", "permute"}
_DIAGONALS = {"diag_embed", "diag", "diagflat"}
_BROADCASTS = {"unsqueeze"}
_RESHAPES = {"view", "reshape", "unsqueeze", "repeat", "expand", "expand_as", "transpose",
             "mT", "contiguous", "clone", "detach", "conj", "real"}
_KEEPS = {"conj", "conj_physical", "contiguous", "detach", "clone", "to", "type", "double",
          "float"}


def eigenpairs(owner: Any, names: list[str]) -> dict[str, str]:
    """Eigenvector parameter -> its eigenvalue parameter, for Function ``owner``.

    Example:
        >>> import torch
        >>> class Rebuild(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, vals, vecs):
        ...         ctx.save_for_backward(vals, vecs)
        ...         return vecs @ (vals.unsqueeze(-1) * vecs.adjoint())
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         vals, vecs = ctx.saved_tensors
        ...         inner = vecs.adjoint() @ g @ vecs
        ...         gaps = vals.unsqueeze(-2) - vals.unsqueeze(-1)  # eigenvalue gaps
        ...         return inner.diagonal(dim1=-2, dim2=-1), vecs @ (gaps * inner)
        >>> eigenpairs(Rebuild, ["vals", "vecs"])
        {'vecs': 'vals'}
        >>> class Weighted(Rebuild):  # the same forward, a weighted Gram's backward
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         vals, vecs = ctx.saved_tensors
        ...         inner = vecs.adjoint() @ g @ vecs
        ...         return inner.diagonal(dim1=-2, dim2=-1), (g + g.mH) @ vecs * vals
        >>> eigenpairs(Weighted, ["vals", "vecs"])
        {}
    """
    forward = getattr(owner, "forward", None)
    tree = parse(forward)
    if tree is None:
        return {}
    found: dict[str, str] = {}
    mapping = {n: n for n in names}
    trees = [(tree, mapping)]
    try:
        trees += list(followed(forward, tree, mapping, owner))
    except Exception:  # noqa: BLE001 - following callees is best effort
        pass
    for body, passed in trees:
        found.update(_read(body, passed))
    if found:  # a weighted Gram x diag(w) x^T has the same shape: backward must say more
        spectra = _differenced(owner, tree, names)
        found = {vecs: vals for vecs, vals in found.items() if vals in spectra}
    return found


def _differenced(owner: Any, forward: ast.AST, names: list[str]) -> set[str]:
    """Parameters whose pairwise differences backward takes (``vals_j - vals_i``, through
    what forward saves and the helpers backward passes them to: ``calc_eig_delta(vals)``),
    the eigenvalue gaps of every eigenvector derivative."""
    from gradsmith.discovery.matrices import _saved_aliases

    backward = getattr(owner, "backward", None)
    tree = parse(backward)
    if tree is None:
        return set()
    aliases = _saved_aliases(forward, tree, {n: None for n in names})
    trees = [(tree, aliases)]
    try:
        trees += list(followed(backward, tree, aliases, owner))
    except Exception:  # noqa: BLE001 - following callees is best effort
        pass
    found: set[str] = set()
    for body, passed in trees:
        for node in ast.walk(body):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub):
                left, right = _root(node.left, passed), _root(node.right, passed)
                if left is not None and left == right:
                    found.add(left)
    return found


def _root(node: ast.AST, names: dict[str, str]) -> str | None:
    """The parameter an expression reshapes (``u.view(-1, 1, n).repeat(1, n, 1)``,
    ``vals[..., None]``, ``vals.unsqueeze(-1)``), else None."""
    while True:
        if isinstance(node, ast.Name):
            return names.get(node.id)
        if isinstance(node, ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in _RESHAPES:
            node = node.func.value
        else:
            return None


def _read(tree: ast.AST, names: dict[str, str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for node in ast.walk(tree):
        if not _is_product(node):
            continue
        plain, flipped, spectra = set(), set(), set()
        for leaf in _operands(node):
            if (vals := _spectrum(leaf, names)) is not None:
                spectra.add(vals)
            elif (matrix := _matrix(leaf, names)) is not None:
                (flipped if matrix[1] else plain).add(matrix[0])
        for vecs in plain & flipped:
            for vals in spectra - {vecs}:
                found.setdefault(vecs, vals)
    return found


def _is_product(node: ast.AST) -> bool:
    return (isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult)) or (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
        and node.func.attr in _PRODUCTS)


def _operands(node: ast.AST) -> list[ast.AST]:
    """The factors of a chain of matrix products and elementwise products (``a @ (b * c)``)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.MatMult, ast.Mult)):
        return _operands(node.left) + _operands(node.right)
    if _is_product(node) and isinstance(node, ast.Call):
        parts = list(node.args) if len(node.args) == 2 else [node.func.value, *node.args]
        return [leaf for part in parts for leaf in _operands(part)]
    return [node]


def _matrix(node: ast.AST, names: dict[str, str]) -> tuple[str, bool] | None:
    """The parameter ``node`` is, and whether it is (conjugate-)transposed."""
    flipped = False
    while True:
        if isinstance(node, ast.Name):
            return (names[node.id], flipped) if node.id in names else None
        if isinstance(node, ast.Attribute) and node.attr in _TRANSPOSES:
            node, flipped = node.value, not flipped
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in _TRANSPOSE_CALLS:
            node, flipped = node.func.value, not flipped
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in _KEEPS:
            node = node.func.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in ("adjoint", "conj") and node.args:
            node = node.args[0]  # torch.adjoint(x)
        else:
            return None


def _spectrum(node: ast.AST, names: dict[str, str]) -> str | None:
    """The parameter ``node`` spreads into a matrix: ``diag_embed(v)``, ``v.unsqueeze(-1)``,
    ``v[..., None]``."""
    if isinstance(node, ast.Call):
        func, callee = node.func, call_name(node)
        if callee in _DIAGONALS:
            target = node.args[0] if node.args else getattr(func, "value", None)
            if isinstance(func, ast.Attribute) and not node.args:
                target = func.value  # v.diag_embed()
            return _name(target, names)
        if callee in _BROADCASTS and isinstance(func, ast.Attribute):
            return _name(func.value, names)
    if isinstance(node, ast.Subscript):
        index = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if any(isinstance(i, ast.Constant) and i.value is None for i in index):
            return _name(node.value, names)
    return None


def _name(node: ast.AST | None, names: dict[str, str]) -> str | None:
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr in _KEEPS:
        node = node.func.value
    return names.get(node.id) if isinstance(node, ast.Name) else None


def decomposed(vecs: Any, vals: Any, seed: int = 0) -> tuple[Any, Any] | None:
    """An eigenpair shaped after ``vecs`` (``(..., n, n)``, ``n`` its last size) and
    ``vals`` (``(..., n)``): the eigen-decomposition of a random symmetric (Hermitian, when
    ``vecs`` is complex) matrix, so the values are distinct and the vectors orthonormal; None
    when the shapes cannot hold one."""
    import torch

    if not (isinstance(vecs, torch.Tensor) and isinstance(vals, torch.Tensor)) or vecs.dim() < 1:
        return None
    n = vecs.shape[-1]
    if n < 2:
        return None
    batch = tuple(vecs.shape[:-2])
    generator = torch.Generator().manual_seed(seed + 7)
    complex_ = vecs.is_complex()
    dtype = torch.complex128 if complex_ else torch.float64
    a = torch.randn((*batch, n, n), dtype=dtype, generator=generator)
    values, vectors = torch.linalg.eigh(a + a.mH)
    scale = float(vals.detach().abs().max()) if vals.numel() else 1.0
    values = values * max(scale, 1.0) / max(float(values.abs().max()), 1e-12)
    values = values.to(vals.dtype if vals.is_floating_point() or vals.is_complex() else dtype)
    return (vectors.to(vecs.dtype).requires_grad_(vecs.requires_grad),
            values.requires_grad_(vals.requires_grad))


def with_eigenpairs(found: Any, names: list[str], pairs: dict[str, str], check) -> Any:
    """``found`` (a :class:`~gradsmith.discovery.synthesize.Synthesized`) with each eigenpair
    made consistent in the inputs and every variant, where ``check(args)`` (forward and
    backward run) accepts it; unchanged when nothing applies."""
    if not pairs:
        return found
    args, description = _paired(found.args, found.description, names, pairs, found.seed, check)
    if args is None:
        return found
    variants = []
    for i, variant in enumerate(found.variants):
        v_args, v_text = _paired(variant.args, variant.description, names, pairs,
                                 found.seed + 1 + i, check)
        if v_args is not None:
            shapes = ", ".join(f"{name} {tuple(v_args[names.index(name)].shape)}"
                               for pair in pairs.items() for name in pair[::-1])
            variants.append(replace(variant, args=v_args, description=v_text,
                                    change=f"{variant.change} (as an eigenpair: {shapes})"))
    return replace(found, args=args, description=description, variants=tuple(variants))


def _paired(args: tuple, description: str, names: list[str], pairs: dict[str, str],
            seed: int, check) -> tuple[tuple | None, str]:
    if len(args) != len(names):
        return None, description
    new = list(args)
    for vecs, vals in pairs.items():
        made = decomposed(new[names.index(vecs)], new[names.index(vals)], seed)
        if made is None:
            return None, description
        new[names.index(vecs)], new[names.index(vals)] = made
        kind = "Hermitian" if new[names.index(vecs)].is_complex() else "symmetric"
        for name, what in (
                (vals, "distinct eigenvalues"),
                (vecs, f"orthonormal eigenvectors, eigh of a random {kind} matrix (the code "
                       f"rebuilds {vecs} diag({vals}) {vecs}^H)")):
            value = new[names.index(name)]
            text = f"{name}: {str(value.dtype).replace('torch.', '')} {tuple(value.shape)} {what}"
            description, hits = re.subn(rf"\b{re.escape(name)}: \w+ \([^)]*\)[^,]*",
                                        lambda _, text=text: text,
                                        description, count=1)
            if not hits:
                description += ", " + text
    if not check(tuple(new)):
        return None, description
    return tuple(new), description
