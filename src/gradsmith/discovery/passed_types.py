"""A parameter forward keeps on ctx and backward hands to an annotated function (private).

``ctx.leak = leak`` in forward and ``leaky_backward(g, x, ctx.leak, ctx.k)`` in backward, where
``def leaky_backward(g: Tensor, x: Tensor, leak: float, k: float)`` (often ``@torch.jit.script``,
which refuses a tensor for a ``float``): the annotation says what the parameter is, though
forward's own body says nothing about it. A 0-d tensor synthesised for ``leak`` made the
frozen-input check fail for the wrong reason and no declaration could pass.
"""

from __future__ import annotations

import ast
import inspect
from typing import Any

from gradsmith.discovery.hints import Hint
from gradsmith.discovery.source import module_function, stored_on_ctx
from gradsmith.discovery.source import parse as _parse

_KINDS = {"float": "float", "int": "int", "bool": "bool"}


def read_passed_types(owner: Any, forward: Any, hints: dict[str, Hint]) -> None:
    """Set ``kind`` (``float``/``int``/``bool``) on the hints of parameters forward stores on
    ctx as they are and backward passes, as ``ctx.<attr>``, to a module-level function whose
    parameter at that place is annotated with that plain type; hints with a kind are kept.

    Example:
        >>> import torch
        >>> def scaled(g: torch.Tensor, leak: float):
        ...     return g * leak
        >>> class F(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x, leak):
        ...         ctx.leak = leak
        ...         return x.clone()
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         return scaled(g, ctx.leak), None
        >>> hints = {"x": Hint(), "leak": Hint()}
        >>> read_passed_types(F, F.forward, hints)
        >>> hints["leak"].kind, hints["x"].kind
        ('float', None)
    """
    backward = getattr(owner, "backward", None) if isinstance(owner, type) else None
    tree = _parse(backward) if backward is not None else None
    if tree is None:
        return
    stored = stored_on_ctx(_parse(forward), list(hints))
    if not stored:
        return
    _divisors(tree, stored, hints)
    for call in ast.walk(tree):
        if not isinstance(call, ast.Call):
            continue
        found = module_function(call, backward)
        if found is None:
            continue
        helper, _ = found
        for arg, kind in zip(call.args, _annotated_kinds(helper)):
            if (kind is not None and isinstance(arg, ast.Attribute)
                    and isinstance(arg.value, ast.Name) and arg.value.id == "ctx"
                    and arg.attr in stored and hints[stored[arg.attr]].kind is None):
                hints[stored[arg.attr]].kind = kind


def _divisors(tree: ast.AST, stored: dict[str, str], hints: dict[str, Hint]) -> None:
    """``2 / (ctx.alpha - 1)`` in backward: ``alpha`` lies above 1 (a q-pseudo-spike's
    ``(1 + 2 / (alpha - 1) |x|) ** -alpha`` is NaN for |x| > 0.25 at alpha 0.5)."""
    for node in ast.walk(tree):
        if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)):
            continue
        den = node.right
        if (isinstance(den, ast.BinOp) and isinstance(den.op, ast.Sub)
                and isinstance(den.left, ast.Attribute) and isinstance(den.left.value, ast.Name)
                and den.left.value.id == "ctx" and den.left.attr in stored
                and isinstance(den.right, ast.Constant) and type(den.right.value) in (int, float)
                and den.right.value > 0):
            hints[stored[den.left.attr]].above = float(den.right.value)


def _annotated_kinds(helper: Any) -> list[str | None]:
    """Per positional parameter of ``helper``: its plain annotation's kind, else None."""
    try:
        params = list(inspect.signature(helper).parameters.values())
    except (TypeError, ValueError):
        return []
    kinds = []
    for p in params:
        note = p.annotation
        name = note if isinstance(note, str) else getattr(note, "__name__", None)
        kinds.append(_KINDS.get(name) if note is not p.empty else None)
    return kinds
