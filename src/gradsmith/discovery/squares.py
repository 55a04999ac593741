"""Square matrices, read from the code (private).

A Function written for a (batch of) square matrices raises, or is wrong, on the rectangular
ones the first layouts give it: a backward that reshapes ``grad_output`` to ``(batch, n, n)``
with ``n`` an input's size raised on a ``(2, 4, 3)`` input (issue 18: DifferentiableSVD's
``ExponentialInverse``, a false ``backward-error``). Read, never run, with
:mod:`~gradsmith.discovery.formula_domains`' reader (forward, and backward through what forward
saves), each sets ``matrix = "square"`` (a structure read elsewhere, such as ``spd`` for a
solve, wins):

- ``t.reshape(b, n, n)`` / ``t.view(-1, n, n)``: one size of ``x`` used twice (``n =
  x.shape[1]``): ``x`` is square in it;
- ``x.size(1) == x.size(2)`` (an assert, or ``!=`` before a raise): ``x`` is square there;
- ``matrix_exp(x)``, ``matrix_power(x, k)``, ``det(x)``, ``eig(x)``, ``eigvals(x)``;
- ``x + eye(n)``, ``x - eps * torch.eye(n).to(x)`` (not ``lam * eye(n)``: a scale);
- ``x @ m @ x.mT`` (``x.bmm(m).bmm(x.transpose(1, 2))``, ``x.T @ x``): a product of ``x``
  with its own transpose, when another parameter of the same Function is read as a square or
  structured matrix (an eigenvector matrix beside its eigenvalues); alone, a Gram matrix of
  rectangular features is as likely.

A (batch of) square matrices is also a valid input of code that takes rectangular ones, so a
wrong reading costs generality of the inputs, never a false alarm of its own.
"""

from __future__ import annotations

import ast
from typing import Any

from gradsmith.discovery.matrices import _matrix_of
from gradsmith.discovery.source import call_name

_SQUARE_CALLS = {"matrix_exp", "matrix_power", "det", "eig", "eigvals"}
_RESHAPES = {"reshape", "view"}
_PRODUCTS = {"bmm", "matmul", "mm"}
_EYES = {"eye", "eye_like"}


def read_squares(tree: ast.AST, reader: Any) -> dict[str, int]:
    """Mark the square matrices ``tree`` shows on ``reader.hints`` (``reader``: a
    :class:`~gradsmith.discovery.formula_domains._Reader` that has visited ``tree``); return
    the parameters multiplied by their own transpose, each with the rank its transpose implies
    (for :func:`square_grams`)."""
    from gradsmith.discovery.formula_domains import _param

    grams: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and call_name(node) in _RESHAPES:
            args = node.args[0].elts if len(node.args) == 1 and isinstance(
                node.args[0], (ast.Tuple, ast.List)) else node.args
            sizes = [s for a in args if (s := _size(reader, a)) is not None and s[0] is not None]
            for size in {s for s in sizes if sizes.count(s) > 1}:
                reader._square(size[0], size[1], "square")  # t.reshape(b, n, n), n = x.shape[1]
        elif isinstance(node, ast.Call) and call_name(node) in _SQUARE_CALLS:
            operand = node.args[0] if node.args else getattr(node.func, "value", None)
            reader._square(_param(operand, reader.names), -1, "square")
        elif isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(
                node.ops[0], (ast.Eq, ast.NotEq)):
            left, right = _size(reader, node.left), _size(reader, node.comparators[0])
            if left and right and left[0] is not None and left[0] == right[0] \
                    and left[1] != right[1]:
                axis = min(left[1], right[1]) if min(left[1], right[1]) >= 0 else -1
                reader._square(left[0], axis, "square")  # x.size(1) == x.size(2)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
            for side, other in ((node.left, node.right), (node.right, node.left)):
                if _is_eye(other):
                    reader._square(_param(side, reader.names), -1, "square")  # x + eye(n)
        if (found := _gram(node, reader.names)) is not None:
            grams[found[0]] = max(grams.get(found[0], 2), found[1])
    return grams


def _size(reader: Any, node: ast.AST) -> tuple[str, int] | None:
    """``reader``'s reading of a size, negative axes too (``x.shape[-1]``, ``x.size(-2)``)."""
    from gradsmith.discovery.formula_domains import _param

    index = None
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and \
            node.value.attr == "shape":
        owner, index = node.value.value, node.slice
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr == "size" and len(node.args) == 1:
        owner, index = node.func.value, node.args[0]
    if isinstance(index, ast.UnaryOp) and isinstance(index.op, ast.USub) and isinstance(
            index.operand, ast.Constant) and type(index.operand.value) is int:
        param = _param(owner, reader.names)
        return (param, -index.operand.value) if param else None
    return reader._size(node)


def square_grams(grams: dict[str, int], hints: dict) -> None:
    """Parameters multiplied by their own transpose made square, when another parameter is
    read as a square (or structured) matrix: the Function is written for square matrices.

    Example:
        >>> from gradsmith.discovery.hints import Hint
        >>> hints = {"vecs": Hint(), "vals": Hint(matrix="square")}
        >>> square_grams({"vecs": 3}, hints)  # vecs.bmm(m).bmm(vecs.transpose(1, 2))
        >>> hints["vecs"].matrix, hints["vecs"].rank_min
        ('square', 3)
        >>> alone = {"x": Hint()}
        >>> square_grams({"x": 2}, alone)  # x @ x.mT alone: a Gram matrix of features
        >>> alone["x"].matrix is None
        True
    """
    if not any(h.matrix is not None for n, h in hints.items() if n not in grams):
        return
    for name, rank in grams.items():
        hint = hints[name]
        if hint.matrix is None and hint.kind in (None, "tensor"):
            hint.matrix = "square"
            hint.rank_min = max(hint.rank_min, rank)


def _is_eye(node: ast.AST) -> bool:
    """``eye(n)``, ``torch.eye(n).to(x)``, ``torch.eye(n).unsqueeze(0).expand(b, n, n)``,
    ``eps * torch.eye(n)``."""

    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Div)):
        return _is_eye(node.left) or _is_eye(node.right)
    while isinstance(node, ast.Call):
        if call_name(node) in _EYES:
            return True
        node = node.func.value if isinstance(node.func, ast.Attribute) else None
    return False


def _gram(node: ast.AST, names: dict[str, str]) -> tuple[str, int] | None:
    """``(x, rank)`` when ``node`` multiplies a product that starts with ``x`` by ``x``
    transposed (or ``x`` transposed by ``x``); the rank a ``transpose(1, 2)`` implies."""
    pair = _factors(node)
    if pair is None:
        return None
    left, right = pair
    while (inner := _factors(left)) is not None:
        left = inner[0]  # x.bmm(m).bmm(x.mT): the chain's first factor
    first, last = _matrix_of(left, names), _matrix_of(right, names)
    if first is None or last is None or first[0] != last[0] or first[1] == last[1]:
        return None
    flipped = right if last[1] else left
    dims = [a.value for a in getattr(flipped, "args", ())
            if isinstance(a, ast.Constant) and type(a.value) is int]
    return first[0], (max(dims) + 1 if len(dims) == 2 and min(dims) >= 0 else 2)


def _factors(node: ast.AST) -> tuple[ast.AST, ast.AST] | None:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
        return node.left, node.right
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr in _PRODUCTS:
        if len(node.args) == 2:  # torch.bmm(a, b)
            return node.args[0], node.args[1]
        if len(node.args) == 1:  # a.bmm(b)
            return node.func.value, node.args[0]
    return None
