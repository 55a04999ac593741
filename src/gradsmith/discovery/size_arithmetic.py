"""Parameters the code does size arithmetic with are integers (private).

``M, C, H, W = x.shape`` binds sizes; ``H_out = 1 + (H + 2 * pad - kh) // stride`` then makes
another size from them and from two parameters, which the code uses as a buffer's size
(``torch.zeros((M, F, H_out, W_out))``) or a loop's bound. Such a parameter is a padding, a
stride, a kernel size: a Python int. Synthesised as a tensor (no name table knows ``pad``) it
turned every size into a tensor, and no layout ran (corpus 12b dev, spent:
CMPUT566-Project's slow_custom_ConvFunction, a convolution written with loops).

:func:`read_size_arithmetic` reads, never runs, an integer division or a ``range()`` bound
whose operand adds or subtracts a size: the parameters standing there as terms (``pad``,
``2 * pad``) and as the divisor (``stride``) get the int kind when nothing else gave them one.
A float never stands there: ``size // 0.5`` is a float, which no buffer takes as a size.
"""

from __future__ import annotations

import ast
from typing import Any

from gradsmith.discovery.source import parse

__all__ = ["read_size_arithmetic"]


def read_size_arithmetic(fn: Any, hints: dict) -> None:
    """Give the ``int`` kind to parameters of ``fn`` (keys of ``hints``, kind unset) that
    the code adds to a tensor's size under ``//`` or in ``range()``.

    Example:
        >>> from gradsmith.discovery.hints import Hint
        >>> def forward(ctx, x, w, stride, pad, eps):
        ...     n, c, h, wd = x.shape
        ...     ho = 1 + (h + 2 * pad - w.shape[2]) // stride
        ...     return x / (h + eps)
        >>> hints = {n: Hint() for n in ["x", "w", "stride", "pad", "eps"]}
        >>> read_size_arithmetic(forward, hints)
        >>> [(n, h.kind) for n, h in hints.items() if h.kind]
        [('stride', 'int'), ('pad', 'int')]
    """
    tree = parse(fn)
    if tree is None:
        return
    sizes = _size_names(tree)
    for node in ast.walk(tree):
        terms: list[str] = []
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.FloorDiv) \
                and _has_size(node.left, sizes):  # (h + 2 * pad - k) // stride
            terms = _terms(node.left) + _terms(node.right)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id == "range":  # range(h + pad)
            terms = [t for a in node.args if _has_size(a, sizes) for t in _terms(a)]
        for name in terms:
            if name in hints and hints[name].kind is None:
                hints[name].kind, hints[name].size_term = "int", True

def _size_names(tree: ast.AST) -> set[str]:
    """Names bound to a tensor's sizes: ``n, c, h, w = x.shape`` (or ``x.size()``) and
    ``h = x.shape[2]`` / ``x.size(2)``."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assign):
            continue
        value = node.value
        for target in node.targets:
            if isinstance(target, (ast.Tuple, ast.List)) and _is_shape(value):
                found |= {e.id for e in target.elts if isinstance(e, ast.Name)}
            elif isinstance(target, ast.Name) and _is_size(value):
                found.add(target.id)
    return found


def _is_shape(node: ast.AST) -> bool:
    if isinstance(node, ast.Call) and not node.args and isinstance(node.func, ast.Attribute):
        node = node.func  # x.size()
    return isinstance(node, ast.Attribute) and node.attr in ("shape", "size")


def _is_size(node: ast.AST) -> bool:
    """``x.shape[i]`` or ``x.size(i)``."""
    if isinstance(node, ast.Subscript):
        return _is_shape(node.value)
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
        and node.func.attr == "size" and len(node.args) == 1


def _has_size(node: ast.AST, sizes: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in sizes or _is_size(n)
               for n in ast.walk(node))


def _terms(node: ast.AST) -> list[str]:
    """The names standing as terms of a sum (``h + 2 * pad - k``: h, pad, k), through
    integer constant factors and parentheses; a name under any other operation is not one."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        return _terms(node.left) + _terms(node.right)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        for a, b in ((node.left, node.right), (node.right, node.left)):
            if isinstance(a, ast.Constant) and type(a.value) is int:
                return _terms(b)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return _terms(node.operand)
    return []
