"""A gradient backward builds as a product of two saved inputs (private).

A feedback-alignment hook returns its input in forward and, in one mode, replaces the
gradient in backward with a projected error: ``e.mm(B.view(-1, n)).view(grad.shape)``, the
error (rows of the output, k) times a fixed matrix (k, the output's features). No layout
tried had that shape, so backward raised on every set with the mode that runs it, and
another set (the mode as a float) won. :func:`read_projections` notes such a pair on the
hints; :func:`projection_layout` gives the shapes: the first tensor (3, 4), the left
factor (3, 5), the right (5, 4). Read, never run.
"""

from __future__ import annotations

import ast
from typing import Any

from gradsmith.discovery.matrices import _saved_aliases
from gradsmith.discovery.source import parse as _parse

_MATMULS = {"mm", "matmul"}
_RESHAPES = {"view", "reshape", "contiguous", "detach", "clone", "float", "double"}


def read_projections(owner: Any, hints: dict) -> None:
    """Set ``hints[left].projects = right`` for each ``left.mm(right)`` (``@``,
    ``torch.mm``/``matmul``) in backward whose factors are forward's saved parameters.

    Example:
        >>> import torch
        >>> from gradsmith.discovery.hints import Hint
        >>> class Hook(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x, e, fb):
        ...         ctx.save_for_backward(x, e, fb)
        ...         return x.clone()
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         x, e, fb = ctx.saved_tensors
        ...         return e.mm(fb.view(-1, g.shape[-1])).view(g.shape), None, None
        >>> hints = {"x": Hint(), "e": Hint(), "fb": Hint()}
        >>> read_projections(Hook, hints)
        >>> hints["e"].projects
        'fb'
    """
    backward = _parse(getattr(owner, "backward", None)) if isinstance(owner, type) else None
    if backward is None:
        return
    names = _saved_aliases(_parse(getattr(owner, "forward", None)), backward, hints)
    for node in ast.walk(backward):
        pair = _factors(node)
        if pair is None:
            continue
        left, right = (_param(n, names) for n in pair)
        if left and right and left != right and hints[left].projects is None:
            hints[left].projects = right


def projection_layout(slots: list) -> tuple[tuple[int, ...], ...] | None:
    """Shapes for a backward that projects: the first tensor (3, 4), each left factor (3, 5)
    and its right factor (5, 4), every other tensor (3, 4); None when no slot projects or
    the first tensor is a factor (a plain matmul chain serves that)."""
    tensors = [s for s in slots if s.kind in ("tensor", "none")]
    names = [s.name for s in tensors]
    pairs = {s.name: s.hint.projects for s in tensors
             if s.hint is not None and s.hint.projects in names}
    if not pairs or not names or names[0] in pairs or names[0] in pairs.values():
        return None
    rights = set(pairs.values())
    return tuple((3, 5) if n in pairs else (5, 4) if n in rights else (3, 4) for n in names)


def _factors(node: ast.AST) -> tuple[ast.AST, ast.AST] | None:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
        return node.left, node.right
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in _MATMULS):
        return None
    owner = node.func.value
    if isinstance(owner, ast.Name) and owner.id == "torch":
        return (node.args[0], node.args[1]) if len(node.args) == 2 else None
    return (owner, node.args[0]) if len(node.args) == 1 else None


def _param(node: ast.AST, names: dict[str, str]) -> str | None:
    """The saved parameter a factor stands for, through reshapes (``B.view(-1, n)``)."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr in _RESHAPES:
        node = node.func.value
    return names.get(node.id) if isinstance(node, ast.Name) else None
