"""Forward's parameters as backward reads them through ``ctx.saved_tensors`` (private).

A Python value (a flag, a count) has to become a tensor before ``save_for_backward`` takes it:
``ctx.save_for_backward(torch.tensor(quantize), torch.tensor(repeat))`` ... ``quant, repeat =
ctx.saved_tensors; if quant: for _ in range(repeat): ...``. Readers of what backward does with
a parameter (:mod:`~gradsmith.discovery.flags`) followed ``ctx.attr`` only, so such a flag
looked unused, was synthesised as a float tensor, and backward raised "Boolean value of Tensor
with more than one value is ambiguous" on every layout: a skip. :func:`saved_locals` maps
backward's locals to the parameters saved at their positions. Read, never run.
"""

from __future__ import annotations

import ast
from typing import Any

from gradsmith.discovery.source import parse

__all__ = ["read_saved_counts", "saved_locals", "wrapped_for_saving"]

_SAVED = ("saved_tensors", "saved_variables")
_WRAPS = ("tensor", "as_tensor")


def saved_locals(owner: Any, names: list[str], wrapped: bool = False) -> dict[str, str]:
    """Backward's local name -> the parameter of ``names`` forward saved at its position
    (as it is or wrapped, ``torch.tensor(flag)``; ``wrapped``: only wrapped ones, Python
    values by construction), from ``a, b = ctx.saved_tensors`` or ``a = ctx.saved_tensors[i]``.

    Example:
        >>> import torch
        >>> class F(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x, quantize, repeat):
        ...         ctx.save_for_backward(torch.tensor(quantize), torch.tensor(repeat))
        ...         return x.clone()
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         quant, times = ctx.saved_tensors
        ...         return (g * 2 if quant else g), None, None
        >>> saved_locals(F, ["x", "quantize", "repeat"])
        {'quant': 'quantize', 'times': 'repeat'}
    """
    if not isinstance(owner, type):
        return {}
    saved: dict[int, str] = {}
    for method in ("forward", "setup_context"):
        tree = parse(vars(owner).get(method))
        for node in ast.walk(tree) if tree is not None else ():
            if _saving(node):
                saved.update({i: p for i, a in enumerate(node.args)
                              if (p := _saved_parameter(a, names, wrapped)) is not None})
    backward = parse(vars(owner).get("backward"))
    if not saved or backward is None:
        return {}
    local: dict[str, str] = {}
    for node in ast.walk(backward):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        target, value = node.targets[0], node.value
        if _is_saved(value) and isinstance(target, (ast.Tuple, ast.List)):
            local.update({e.id: saved[i] for i, e in enumerate(target.elts)
                          if isinstance(e, ast.Name) and i in saved})
        elif (isinstance(value, ast.Subscript) and _is_saved(value.value)
              and isinstance(value.slice, ast.Constant) and value.slice.value in saved
              and isinstance(target, ast.Name)):
            local[target.id] = saved[value.slice.value]
    return local


def read_saved_counts(owner: Any, hints: dict) -> None:
    """A Python value forward saves as a tensor and backward passes to ``range`` (``for _ in
    range(repeat)``): an int, a count (at least 1). Only where nothing else gave it a kind.

    Example:
        >>> import torch
        >>> from gradsmith.discovery.hints import Hint
        >>> class F(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x, repeat):
        ...         ctx.save_for_backward(torch.tensor(repeat))
        ...         return x.clone()
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         (n,) = ctx.saved_tensors
        ...         return sum(g for _ in range(n)) / n, None
        >>> hints = {"x": Hint(), "repeat": Hint()}
        >>> read_saved_counts(F, hints)
        >>> hints["repeat"].kind, hints["repeat"].count
        ('int', True)
    """
    local = saved_locals(owner, list(hints), wrapped=True)
    backward = parse(vars(owner).get("backward")) if local else None
    for node in ast.walk(backward) if backward is not None else ():
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id == "range":
            for arg in node.args:
                hint = hints[local[arg.id]] if isinstance(arg, ast.Name) and \
                    arg.id in local else None
                if hint is not None and hint.kind in (None, "int"):
                    hint.kind = "int"
                    hint.count = hint.count or len(node.args) == 1


def wrapped_for_saving(node: ast.AST, parents: dict) -> bool:
    """Whether ``node`` (a parameter's name) is only made a tensor to be saved:
    ``ctx.save_for_backward(torch.tensor(flag))``; that passes it on, it does not use it."""
    call = parents.get(node)
    return (isinstance(call, ast.Call) and _wrap(call) and call.args[:1] == [node]
            and _saving(parents.get(call)))


def _saving(node: Any) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
        node.func.attr == "save_for_backward"


def _wrap(node: ast.Call) -> bool:
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    return name in _WRAPS and len(node.args) == 1


def _saved_parameter(node: ast.AST, names: list[str], wrapped: bool) -> str | None:
    if isinstance(node, ast.Call) and _wrap(node):
        node = node.args[0]
    elif wrapped:
        return None
    return node.id if isinstance(node, ast.Name) and node.id in names else None


def _is_saved(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr in _SAVED
