"""Functions whose forward returns only integer tensors while backward returns a gradient
(private): synthesis keeps the inputs on which such a forward runs, so the check can report
that the backward never runs (``integer-output-backward``) instead of skipping the row.

Backward returning a gradient for an input is the evidence that a gradient is meant to flow:
an argmax whose backward returns only ``None``, or a forward that marks its outputs
non-differentiable, means its integer output and is left as it was (no inputs, a skip).
"""

from __future__ import annotations

import ast
from typing import Any

from gradsmith.discovery.build import build_args
from gradsmith.discovery.layout_search import Synthesized
from gradsmith.discovery.layouts import layouts_for
from gradsmith.discovery.slots import Slot
from gradsmith.discovery.source import parse

__all__ = ["gradient_positions", "integer_output_inputs", "only_integer_tensors"]


def gradient_positions(owner: type | None) -> set[int]:
    """Positions of forward's inputs that some ``return`` of backward gives a value other
    than a literal ``None`` (a bare ``return g`` gives position 0 one); empty when backward
    has no readable source or forward marks outputs non-differentiable (integer outputs meant).

    Example:
        >>> import torch
        >>> class Ste(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x, bits):
        ...         return (x > 0).long()
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         return g, None
        >>> class Argmax(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x):
        ...         return x.argmax(-1)
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         return None
        >>> gradient_positions(Ste), gradient_positions(Argmax)
        ({0}, set())
    """
    if owner is None or _marks_non_differentiable(owner):
        return set()
    tree = parse(getattr(owner, "backward", None))
    found: set[int] = set()
    for node in ast.walk(tree) if tree is not None else ():
        if not isinstance(node, ast.Return) or node.value is None:
            continue
        elts = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
        found |= {i for i, e in enumerate(elts) if not _is_none(e)}
    return found


def _is_none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _marks_non_differentiable(owner: type) -> bool:
    for method in ("forward", "setup_context"):
        tree = parse(vars(owner).get(method) or getattr(owner, method, None))
        for node in ast.walk(tree) if tree is not None else ():
            if isinstance(node, ast.Attribute) and node.attr == "mark_non_differentiable":
                return True
    return False


def only_integer_tensors(out: Any) -> bool:
    """True when ``out`` holds tensors and none of them is floating or complex.

    Example:
        >>> import torch
        >>> only_integer_tensors(torch.ones(2).long()), only_integer_tensors((torch.ones(2), 1))
        (True, False)
    """
    import torch

    items = out if isinstance(out, (tuple, list)) else (out,)
    tensors = [t for t in items if isinstance(t, torch.Tensor)]
    return bool(tensors) and not any(t.is_floating_point() or t.is_complex() for t in tensors)


def integer_output_inputs(call, owner: type | None, plans: list[list[Slot]],
                          seed: int) -> Synthesized | None:
    """Inputs of the first plan and layout on which forward runs and returns only integer
    tensors while backward returns a gradient for a floating input that requires grad on
    them; None when there is no such layout, or backward returns no gradient (see
    :func:`gradient_positions`)."""
    import warnings

    import torch

    positions = gradient_positions(owner)
    if not positions:
        return None
    for slots in plans:
        for layout in layouts_for(slots):
            args, parts = build_args(slots, layout, seed, dtype="float64")
            if not any(i < len(args) and _trainable(args[i]) for i in positions):
                continue
            try:
                with torch.enable_grad(), warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    out = call(*args)
            except Exception:  # noqa: BLE001 - user code: this layout does not fit
                continue
            if only_integer_tensors(out):
                fresh, parts = build_args(slots, layout, seed, dtype="float64")
                return Synthesized(tuple(fresh), ", ".join(parts), (), seed)
    return None


def _trainable(value: Any) -> bool:
    import torch

    return isinstance(value, torch.Tensor) and value.is_floating_point() and value.requires_grad
