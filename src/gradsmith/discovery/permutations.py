"""Arguments that index one dimension in forward and backward alike: a permutation (private).

``out = x[..., idx]`` in forward and ``grad_x[..., idx] = grad`` in backward: ``idx`` selects
positions along one dimension, and backward scatters the gradient back through the same
positions. Read in forward alone, ``idx`` looked like an int (``x[..., 2]``), and backward's
scatter of a (3,)-gradient into a single column raised (corpus 11b's pytorch-onn
``ButterflyPermutationFunction``). Backward's scatter is the gradient of forward's gather
exactly when every position is written once, so the input the code is written for is a
permutation of that dimension: synthesis gives one (:mod:`~gradsmith.discovery.build`), which
a planted wrong scatter still fails on.
"""

from __future__ import annotations

import ast
import inspect
from typing import TYPE_CHECKING, Any

from gradsmith.discovery.backward_shapes import dotted, kept_on_ctx
from gradsmith.discovery.matrices import _saved_aliases
from gradsmith.discovery.source import parse

if TYPE_CHECKING:  # the linter imports discovery without torch installed
    import torch


def read_permutations(owner: type | None, hints: dict[str, Any]) -> None:
    """Set ``hints[name].kind = "index"`` and ``hints[name].permutes`` (the dimension, from the
    end after ``...``, else from the start) for each parameter that forward uses as the one
    tensor subscript along a dimension and backward uses the same way, through ctx or saved.

    Example:
        >>> import torch
        >>> from gradsmith.discovery.hints import Hint
        >>> class Permute(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x, idx):
        ...         ctx.idx = idx
        ...         return x[..., idx]
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         out = g.clone()
        ...         out[..., ctx.idx] = g
        ...         return out, None
        >>> hints = {"x": Hint(), "idx": Hint()}
        >>> read_permutations(Permute, hints)
        >>> (hints["idx"].kind, hints["idx"].permutes)
        ('index', -1)
    """
    if owner is None:
        return
    forward = getattr(owner, "forward", None)
    tree, back = parse(forward), parse(getattr(owner, "backward", None))
    if tree is None or back is None:
        return
    annotated = _annotated(forward)
    kept = {**_saved_aliases(tree, back, hints), **kept_on_ctx(tree, hints)}
    backward_uses = _subscript_uses(back, lambda n: kept.get(dotted(n)) or _alias(n, back, kept))
    for name, dim in _subscript_uses(tree, lambda n: dotted(n) if dotted(n) in hints
                                     else None).items():
        if name in annotated or hints[name].kind not in (None, "int", "index"):
            continue
        if backward_uses.get(name) == dim:
            hints[name].kind, hints[name].permutes = "index", dim


def permutation(slot: Any, shape: tuple[int, ...], strided: bool,
                generator: torch.Generator) -> tuple[torch.Tensor, str] | None:
    """A permutation of ``shape``'s dimension ``slot.hint.permutes`` and its description (every
    other element of a doubled one when ``strided``: non-contiguous), or None."""
    import torch

    dim = slot.hint.permutes if slot.hint is not None else None
    if dim is None or not -len(shape) <= dim < len(shape):
        return None
    perm = torch.randperm(shape[dim], generator=generator)
    return (torch.stack([perm, perm], 1)[:, 0] if strided else perm,
            f"{slot.name}: int64 ({shape[dim]},), a permutation of dim {dim}"
            + (", non-contiguous (stride 2)" if strided else ""))


def _subscript_uses(tree: ast.AST, param: Any) -> dict[str, int]:
    """Parameter (as ``param`` maps a node) -> the dimension it indexes as a lone tensor
    element of a subscript (``x[..., p]`` -1, ``x[:, p]`` 1); a parameter used at two
    dimensions is left out."""
    found: dict[str, int] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Subscript):
            continue
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        ellipsis = [i for i, e in enumerate(items)
                    if isinstance(e, ast.Constant) and e.value is Ellipsis]
        for i, e in enumerate(items):
            name = param(e) if isinstance(e, (ast.Name, ast.Attribute)) else None
            if name is None:
                continue
            dim = i - len(items) if ellipsis and ellipsis[0] < i else i
            found[name] = dim if found.get(name, dim) == dim else None
    return {k: v for k, v in found.items() if v is not None}


def _alias(node: ast.AST, backward: ast.AST, kept: dict[str, str]) -> str | None:
    """``idx = ctx.idx`` in backward: the local name stands for the kept parameter."""
    if not isinstance(node, ast.Name):
        return None
    for n in ast.walk(backward):
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == node.id
                                             for t in n.targets):
            return kept.get(dotted(n.value))
    return None


def _annotated(forward: Any) -> set[str]:
    """Parameters annotated as plain numbers (``k: int``): an int the user stated."""
    try:
        params = inspect.signature(forward).parameters.values()
    except (TypeError, ValueError):
        return set()
    return {p.name for p in params if p.annotation in (int, "int", float, "float")}
