"""Einsum ranks: an einsum equation states the rank of each of its operands (private).

plenoxels' ``TrilinearInterpolate`` computes ``torch.einsum('bki, bki -> bk', data, weights)``:
synthesis made ``data`` a matrix and every layout failed ("the number of subscripts in the
equation (3) does not match the number of dimensions (2)"). Without an ellipsis, the i-th
subscript group of the equation is exactly the rank of the i-th operand, so a parameter passed
there directly is a tensor of that rank (with an ellipsis: at least the letters it names).
Read, never run.
"""

from __future__ import annotations

import ast
from typing import Any


def read_einsum_ranks(tree: ast.AST, hints: dict[str, Any]) -> None:
    """Raise ``rank_min`` (and set ``kind="tensor"``) on each parameter that an einsum with a
    literal equation takes as an operand.

    Example:
        >>> from gradsmith.discovery.hints import Hint
        >>> hints = {"x": Hint(), "w": Hint()}
        >>> read_einsum_ranks(ast.parse("y = torch.einsum('bki,bki->bk', x, w.unsqueeze(1))"),
        ...                   hints)
        >>> hints["x"].rank_min, hints["x"].kind, hints["w"].rank_min
        (3, 'tensor', 0)
    """
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _is_einsum(node.func) and node.args):
            continue
        equation = node.args[0]
        if not (isinstance(equation, ast.Constant) and isinstance(equation.value, str)):
            continue
        operands = node.args[1:]
        if len(operands) == 1 and isinstance(operands[0], (ast.List, ast.Tuple)):
            operands = operands[0].elts  # einsum(eq, [a, b])
        groups = equation.value.split("->")[0].split(",")
        if len(groups) != len(operands):
            continue
        for group, operand in zip(groups, operands):
            if not (isinstance(operand, ast.Name) and operand.id in hints):
                continue
            letters = [c for c in group.replace("...", "") if c.isalpha()]
            hint = hints[operand.id]
            if hint.kind in (None, "float", "tensor"):
                hint.kind = "tensor"
                hint.rank_min = max(hint.rank_min, len(letters))


def _is_einsum(func: ast.AST) -> bool:
    """``torch.einsum``, ``einsum`` (imported), ``opt_einsum.contract`` is not read."""
    if isinstance(func, ast.Attribute):
        return func.attr == "einsum" and isinstance(func.value, ast.Name) and \
            func.value.id in ("torch", "th", "pt")
    return isinstance(func, ast.Name) and func.id == "einsum"
