"""Matrices with structure: what linear algebra a Function does with a parameter (private).

A random matrix is not what ``cholesky``, a triangular solve or a symmetric-matrix formula is
written for: ``cholesky`` raises on it, a triangular solve of a random square matrix is
ill-conditioned and ignores half of it, and a backward that relies on symmetry (``2 A B`` for
``d diag(B^T A B) / d B``) is wrong off its contract, a false alarm. Read, never run, from
forward and backward (through what forward saves: ``ctx.save_for_backward(z, L)`` ...
``z, L = ctx.saved_tensors``), from the code forward hands a parameter to (see
:mod:`~gradsmith.discovery.callees`) and from the docstrings:

- ``solve_triangular(A, B, upper=False)``, ``triangular_solve(B, A, upper=...)``, a helper
  named ``*triangular*`` given ``upper=``, ``cholesky_solve(B, L)``: ``A`` is lower (upper)
  triangular with a well-conditioned diagonal (``A.mT``/``A.t()``/``A.transpose(-1, -2)``
  given: the other triangle);
- ``cholesky(A)`` (any function named ``*cholesky``), ``solve(A, B)``, ``inv(A)``,
  ``inverse(A)``, ``logdet(A)``, ``lu_factor(A)`` whose factor ``lu_solve`` uses: symmetric
  positive definite; ``cholesky(-2.0 * A)`` negative
  definite;
- a parameter its docstring calls symmetric, positive definite or lower/upper triangular
  (``:param matrix: A symmetric matrix of size `(..., M, M)```): so.

:func:`structured` then builds such a matrix (square in its last two dimensions).
"""

from __future__ import annotations

import ast
import inspect
import re
from typing import Any

from gradsmith.discovery.callees import followed
from gradsmith.discovery.diagonals import read_diagonals
from gradsmith.discovery.source import parse

_TRANSPOSES = {"t", "mT", "T", "transpose"}
# Decompositions and solves defined for a matrix of any aspect: a formula for their gradient
# is often right for one aspect only (a null-space term needed only when m > n).
_ANY_ASPECT = {"svd", "svdvals", "qr", "lstsq", "pinv", "pinverse", "matrix_rank", "lu",
               "lu_factor", "svd_lowrank", "pca_lowrank"}
_SPD_CALLS = {"solve", "inv", "inverse", "logdet", "slogdet", "inv_ex", "cholesky_inverse"}
_DOC_WORDS = (("positive definite", "spd"), ("positive-definite", "spd"), ("spd", "spd"),
              ("psd", "spd"), ("lower triangular", "tril"), ("lower-triangular", "tril"),
              ("upper triangular", "triu"), ("upper-triangular", "triu"),
              ("symmetric", "symmetric"))


def read_matrices(owner: Any, hints: dict) -> None:
    """Set ``hints[name].matrix`` (``tril``, ``triu``, ``spd``, ``negdef``, ``symmetric``,
    ``diagonal``: see :mod:`~gradsmith.discovery.diagonals`) for
    the parameters of ``owner`` (a Function class) the code uses as structured matrices.

    Example:
        >>> import torch
        >>> from gradsmith.discovery.hints import Hint
        >>> class Solve(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, chol, b):
        ...         ctx.save_for_backward(chol)
        ...         return torch.linalg.solve_triangular(chol, b, upper=False)
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         (L,) = ctx.saved_tensors
        ...         return None, torch.linalg.solve_triangular(L.mT, g, upper=True)
        >>> hints = {"chol": Hint(), "b": Hint()}
        >>> read_matrices(Solve, hints)
        >>> hints["chol"].matrix, hints["b"].matrix
        ('tril', None)
    """
    forward = getattr(owner, "forward", None)
    names = {n: n for n in hints}
    for tree in (parse(forward), parse(vars(owner).get("setup_context"))):
        if tree is not None:
            _read(tree, names, hints)
            for helper, passed in followed(forward, tree, names, owner):
                _read(helper, passed, hints)  # Owner._forward(A), Shared.forward(ctx, A)
    backward = parse(getattr(owner, "backward", None))
    if backward is not None:
        _read(backward, _saved_aliases(parse(forward), backward, hints), hints)
    for name, kind in _documented(forward, hints).items():
        hints[name].matrix = hints[name].matrix or kind
    read_diagonals(owner, hints)  # backward returns diag_embed(...) for it: diagonal


def _saved_aliases(forward: ast.AST | None, backward: ast.AST, hints: dict,
                   aliases: dict[str, str] | None = None) -> dict[str, str]:
    """Backward's local name -> parameter, for tensors forward saves as they are (or as
    forward's ``aliases`` of them: ``vecs, vals = input1, input2``)."""
    names = aliases or {n: n for n in hints}
    saved: list[str | None] = []
    for node in ast.walk(forward) if forward is not None else ():
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "save_for_backward"):
            saved = [names.get(a.id) if isinstance(a, ast.Name) else None for a in node.args]
    aliases: dict[str, str] = {}
    for node in ast.walk(backward):
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], (ast.Tuple, ast.List))
                and isinstance(node.value, ast.Attribute)
                and node.value.attr in ("saved_tensors", "saved_variables")):
            for element, name in zip(node.targets[0].elts, saved):
                if isinstance(element, ast.Name) and name is not None:
                    aliases[element.id] = name
    return aliases


def _matrix_of(node: ast.AST, names: dict[str, str]) -> tuple[str, bool] | None:
    """The parameter a matrix argument stands for, and whether it is transposed."""
    flipped = False
    while True:
        if isinstance(node, ast.Name):
            return (names[node.id], flipped) if node.id in names else None
        if isinstance(node, ast.Attribute) and node.attr in ("mT", "T"):
            node, flipped = node.value, not flipped
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in _TRANSPOSES):
            node, flipped = node.func.value, not flipped
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ("contiguous", "detach", "clone", "double", "float")):
            node = node.func.value
        else:
            return None


def _upper(call: ast.Call, default: bool | None) -> bool | None:
    for kw in call.keywords:
        if kw.arg == "upper" and isinstance(kw.value, ast.Constant):
            return bool(kw.value.value)
    return default


def _read(tree: ast.AST, names: dict[str, str], hints: dict) -> None:
    # lu_factor(A) is defined for any aspect, but a factor lu_solve uses is a square system's
    lu_solves = any(isinstance(n, ast.Call) and isinstance(n.func, (ast.Attribute, ast.Name))
                    and getattr(n.func, "attr", getattr(n.func, "id", "")) == "lu_solve"
                    for n in ast.walk(tree))
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(
            node.func, "id", "")
        if func == "solve_triangular" or ("triangular" in func and func != "triangular_solve"):
            upper = _upper(node, None)
            _triangular(node.args[0], upper, names, hints)
        elif func == "triangular_solve" and len(node.args) >= 2:
            _triangular(node.args[1], _upper(node, True), names, hints)
        elif func == "cholesky_solve" and len(node.args) >= 2:
            _triangular(node.args[1], _upper(node, False), names, hints)
        elif func.endswith("cholesky") or func == "cholesky_ex":
            _definite(node.args[0], names, hints)
        elif func in _SPD_CALLS or (lu_solves and func in ("lu_factor", "lu_factor_ex")):
            found = _matrix_of(node.args[0], names)
            if found is not None:
                _set(hints, found[0], "spd")
        elif func in _ANY_ASPECT and (found := _matrix_of(node.args[0], names)) is not None \
                and hints[found[0]].kind in (None, "tensor"):
            hints[found[0]].aspect = True  # tried tall, wide and square (see .variants)


def _set(hints: dict, name: str, kind: str) -> None:
    if hints[name].matrix is None and hints[name].kind in (None, "tensor"):
        hints[name].matrix = kind


def _triangular(arg: ast.AST, upper: bool | None, names: dict[str, str], hints: dict) -> None:
    found = _matrix_of(arg, names)
    if found is not None and upper is not None:
        _set(hints, found[0], "triu" if upper != found[1] else "tril")


def _definite(arg: ast.AST, names: dict[str, str], hints: dict) -> None:
    """``cholesky(A)``: A positive definite; ``cholesky(-2.0 * A)``: negative definite."""
    sign = 1
    if isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Mult):
        for factor, other in ((arg.left, arg.right), (arg.right, arg.left)):
            value = _number(factor)
            if value is not None:
                sign, arg = (-1 if value < 0 else 1), other
                break
    found = _matrix_of(arg, names)
    if found is not None:
        _set(hints, found[0], "negdef" if sign < 0 else "spd")


def _number(node: ast.AST) -> float | None:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _number(node.operand)
        return None if inner is None else -inner
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return float(node.value)
    return None


def _documented(forward: Any, hints: dict) -> dict[str, str]:
    """``:param matrix: A symmetric matrix``, ``matrix (Tensor): lower triangular ...``."""
    doc = inspect.getdoc(forward) or ""
    found: dict[str, str] = {}
    pattern = r"^\s*(?::param\s+(\w+)\s*:|(\w+)\s*(?:\([^)]*\))?\s*:)(.*)$"
    for line in doc.splitlines():
        m = re.match(pattern, line)
        name = m and (m.group(1) or m.group(2))
        if not name or name not in hints:
            continue
        text = m.group(3).lower()
        for words, kind in _DOC_WORDS:
            if re.search(r"\b" + words + r"\b", text):
                found.setdefault(name, kind)
                break
    return found


def structured(kind: str, shape: tuple[int, ...], generator: Any, dtype: Any,
               positive: bool = False) -> Any:
    """A matrix of ``kind`` (batched over the leading dimensions of ``shape``, square in the
    last two): well conditioned, so a solve or a Cholesky factor stays accurate. ``positive``
    (the plan's retry on positive values) makes a ``square`` matrix's entries uniform in
    [0.5, 1.5) (a ``diagonal`` one's diagonal); the other kinds keep the values their
    structure needs (see
    :func:`positive_entries`)."""
    import torch

    n = shape[-1]
    lead = tuple(shape[:-2])
    b = torch.randn((*lead, n, n), dtype=torch.float64, generator=generator)
    eye = torch.eye(n, dtype=torch.float64)
    if kind in ("spd", "negdef"):
        value = b @ b.mT / n + eye
        value = -value if kind == "negdef" else value
    elif kind == "symmetric":
        value = (b + b.mT) / 2
    elif kind == "diagonal":  # an eigenvalue matrix: see diagonals
        values = torch.randn((*lead, n), dtype=torch.float64, generator=generator)
        if positive:
            values = torch.rand((*lead, n), dtype=torch.float64, generator=generator) + 0.5
        value = torch.diag_embed(values)
    elif kind == "square" and positive:  # x.sqrt() of a square matrix, retried positive
        value = torch.rand((*lead, n, n), dtype=torch.float64, generator=generator) + 0.5
    elif kind == "square":  # only the shape is asked for (x.reshape(b, d * d))
        value = b
    else:
        diagonal = 1 + torch.rand((*lead, n), dtype=torch.float64, generator=generator)
        value = torch.tril(b, -1) * 0.5 + torch.diag_embed(diagonal)
        value = value.mT if kind == "triu" else value
    return value.to(dtype).contiguous()


def positive_entries(kind: str | None) -> bool:
    """Whether :func:`structured` honours ``positive`` for ``kind`` (no kind: a plain tensor,
    which the builder draws positive itself)."""
    return kind in (None, "square")


def square(shape: list[int]) -> list[int]:
    """``shape`` made a (batch of) square matrices: rank 2 at least, the last two dimensions
    the size of the last (``(4, 3)`` -> ``(3, 3)``: it multiplies a ``(3, 5)``; ``(5,)`` ->
    ``(5, 5)``)."""
    if not shape:
        return [3, 3]
    return [*shape[:-2], shape[-1], shape[-1]]
