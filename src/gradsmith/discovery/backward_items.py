"""A tensor backward reads one number from: a one-element tensor (private).

DoReFa's gradient quantizer (corpus 14b dev, ``QuantizationGradientFunction``) saves its bit
width ``k`` (``ctx.save_for_backward(k)``; the layer keeps ``FloatTensor([k])`` as a buffer)
and backward computes ``n = (2 ** k - 1).item()``. Forward does nothing else with ``k``, so
synthesis gave it the input's (3, 4) shape, and every candidate raised "a Tensor with 12
elements cannot be converted to Scalar" in backward: a backward-error on inputs the code is
not written for. ``.item()`` (or ``float()``/``int()``) of an expression in backward that
reads only one saved parameter (a saved tensor, or one kept on ctx) says that parameter holds
one value: it becomes a 0-dim tensor (:mod:`gradsmith.discovery.slots`).
"""

from __future__ import annotations

import ast
from typing import Any

from gradsmith.discovery.backward_shapes import backward_locals, dotted

# Calls that reduce a tensor to one number: what is read before them may have many elements.
_REDUCTIONS = {"sum", "mean", "max", "min", "amax", "amin", "norm", "prod", "any", "all",
               "numel", "std", "var", "dot", "count_nonzero", "argmax", "argmin", "median",
               "logsumexp", "size", "dim"}


def _called(node: ast.Call) -> str | None:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else (
        func.id if isinstance(func, ast.Name) else None)


def read_backward_items(owner: type | None, hints: dict[str, Any]) -> None:
    """Set ``hints[name].item`` for each parameter backward reads one number from.

    Example:
        >>> import torch
        >>> from gradsmith.discovery.hints import Hint
        >>> class GradQuant(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x, k):
        ...         ctx.save_for_backward(k)
        ...         return x
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         k, = ctx.saved_tensors
        ...         n = (2 ** k - 1).item()
        ...         return (g * n).round() / n, None
        >>> hints = {"x": Hint(), "k": Hint()}
        >>> read_backward_items(GradQuant, hints)
        >>> hints["k"].item, hints["x"].item
        (True, False)
    """
    found = backward_locals(owner, hints)
    if found is None:
        return
    forward, backward, local = found
    for node in ast.walk(backward):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr == "item" and not node.args:
            inner = node.func.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id in ("float", "int") and len(node.args) == 1:
            inner = node.args[0]
        else:
            continue
        if any(isinstance(n, ast.Call) and _called(n) in _REDUCTIONS for n in ast.walk(inner)):
            continue  # x.sum().item(): one number from many, x itself may be any tensor
        read = {local[d] for n in ast.walk(inner) if (d := dotted(n)) in local}
        if len(read) == 1:
            (name,) = read
            hint = hints[name]
            if hint.kind in (None, "tensor") and hint.rank_min == 0:
                hint.kind, hint.item = "tensor", True
