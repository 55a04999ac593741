"""Vectors of one value per leading index of another tensor (private).

A per-output-channel quantiser scales a weight ``(out, in, kh, kw)`` by
``scale[:, None, None, None]`` (or ``scale.view(-1, 1, 1, 1)``): ``scale`` is 1-D, one value per
row of a 4-D tensor. Given the first layouts' same shapes, ``(3, 4)[:, None, None, None]``
broadcast the product to ``(3, 1, 1, 3, 4)``: forward ran, backward's gradient had the wrong
shape and the estimator's declaration could not pass. Read, never run:

- :func:`read_leading` marks such a parameter's hint with the rank of the tensor it scales;
- :func:`leading_layout` gives it ``(3,)`` and every other tensor ``(3, 2, 4, 5)`` cut to that
  rank.
"""

from __future__ import annotations

import ast
from typing import Any

from gradsmith.discovery.hints import Hint, _param_of
from gradsmith.discovery.slots import Slot
from gradsmith.discovery.source import parse

_ROWS = (3, 2, 4, 5, 2, 3)
_RESHAPES = {"view", "reshape"}


def read_leading(target: Any, owner: type | None, hints: dict[str, Hint]) -> set[str]:
    """Mark the parameters forward (or setup_context) spreads one value per leading index of
    a tensor of rank 2 or more; returns their names.

    Example:
        >>> def forward(ctx, w, scale):
        ...     return (w * scale[:, None, None, None]).round()
        >>> hints = {"w": Hint(), "scale": Hint()}
        >>> read_leading(forward, None, hints), hints["scale"].leading
        ({'scale'}, 4)
    """
    trees = [parse(target)]
    if owner is not None:
        trees.append(parse(vars(owner).get("setup_context")))
    found: dict[str, int] = {}
    for tree in filter(None, trees):
        for node in ast.walk(tree):
            name, rank = _spread(node, hints)
            if name is not None and hints[name].kind in (None, "tensor"):
                found[name] = rank
    for name, rank in found.items():
        hints[name].leading = rank
    return set(found)


def _spread(node: ast.AST, hints: dict[str, Hint]) -> tuple[str | None, int]:
    """``(parameter, rank)`` for ``p[:, None, ...]`` and ``p.view(-1, 1, ...)``, else None."""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Tuple):
        first, *rest = node.slice.elts or [None]
        if isinstance(first, ast.Slice) and first.lower is first.upper is first.step is None \
                and rest and all(_is(e, None) for e in rest):
            return _param_of(node.value, hints), len(node.slice.elts)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr in _RESHAPES and len(node.args) >= 2 and _is(node.args[0], -1) \
            and all(_is(a, 1) for a in node.args[1:]):
        return _param_of(node.func.value, hints), len(node.args)
    return None, 0


def _is(node: ast.AST, value: Any) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(
            node.operand, ast.Constant) and isinstance(node.operand.value, int):
        return value == -node.operand.value
    return isinstance(node, ast.Constant) and node.value == value and type(node.value) is type(
        value)


def leading_layout(slots: list[Slot]) -> tuple[tuple[int, ...], ...] | None:
    """Shapes for a Function with a leading vector: the vector ``(3,)``, every other tensor
    ``(3, 2, 4, 5)`` cut to the rank the code spreads it to; None when no slot is one."""
    tensors = [s for s in slots if s.kind in ("tensor", "none")]
    ranks = [s.hint.leading if s.hint is not None else 0 for s in tensors]
    rank = max(ranks, default=0)
    if not rank or all(ranks):
        return None
    return tuple((_ROWS[0],) if r else _ROWS[:rank] for r in ranks)
