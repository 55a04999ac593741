"""Inputs shaped by how forward reads them (private): 0/1 masks and constant-index columns.

An argument forward uses as a 0/1 mask (``mask.bool()``, ``mask == 0``, ``x * mask``) gets
0/1 values, both present: Gaussian values make ``mask.bool()`` all True, so a backward that
forgets the mask passes. A tensor whose last axis forward reads only at constant indices
``0..k-1`` (:func:`~gradsmith.discovery.group_sizes.constant_reads`) gets ``k`` columns: more
columns would get gradients the code never gives them. The new inputs are kept only when
forward and backward run on them; the Inputs column says what was chosen and why.
"""

from __future__ import annotations

import ast
import re
from dataclasses import replace
from typing import Any

from gradsmith.discovery.group_sizes import constant_reads
from gradsmith.discovery.source import parse as _parse


def thresholded_names(target: Any, names: list[str]) -> set[str]:
    """The arguments of ``target`` turned into booleans (``m.bool()``, ``mask == 0``): at a
    0 entry a finite-difference step flips them, so a mask whose gradient is checked keeps
    its Gaussian values.

    Example:
        >>> def f(x, mask):
        ...     return x * mask.bool()
        >>> thresholded_names(f, ["x", "mask"])
        {'mask'}
    """
    tree = _parse(target)
    return set() if tree is None else _masks(tree, thresholds_only=True) & set(names)


def mask_names(target: Any, names: list[str]) -> set[str]:
    """The arguments of ``target`` it uses as 0/1 masks: ``m.bool()``, or ``m == 0`` (or 1,
    ``!=``) and ``x * m`` for an argument named ``*mask*`` (``x == 0`` alone is a kink
    test on a real input, not a mask).

    Example:
        >>> def f(x, mask, keep_mask, y):
        ...     return (x * mask).masked_fill(keep_mask == 0, 0.0) * (y == 0)
        >>> sorted(mask_names(f, ["x", "mask", "keep_mask", "y"]))
        ['keep_mask', 'mask']
    """
    tree = _parse(target)
    return set() if tree is None else _masks(tree, thresholds_only=False) & set(names)


def _masks(tree: ast.AST, thresholds_only: bool) -> set[str]:
    found = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "bool" and isinstance(node.func.value, ast.Name)):
            found.add(node.func.value.id)
        elif (isinstance(node, ast.Compare) and len(node.ops) == 1
              and isinstance(node.ops[0], (ast.Eq, ast.NotEq))):
            sides = (node.left, node.comparators[0])
            if any(isinstance(s, ast.Constant) and s.value in (0, 1) for s in sides):
                found |= {s.id for s in sides if isinstance(s, ast.Name) and _named_mask(s.id)}
        elif (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult)
              and not thresholds_only):
            found |= {s.id for s in (node.left, node.right)
                      if isinstance(s, ast.Name) and _named_mask(s.id)}
    return found


def _named_mask(name: str) -> bool:
    return "mask" in name.lower()


def read_shaped(found: Any, call: Any, target: Any, names: list[str]) -> Any:
    """``found`` with mask arguments made 0/1 and constant-index columns cut to their count,
    when forward and backward run on the result (variants changed alike); else ``found``.
    Integer-valued orders then (:func:`~gradsmith.discovery.orders.with_integer_orders`)."""
    from gradsmith.discovery.orders import with_integer_orders

    return with_integer_orders(_read_shaped(found, call, target, names), call, names)


def _read_shaped(found: Any, call: Any, target: Any, names: list[str]) -> Any:
    from gradsmith.discovery.placement import with_note
    from gradsmith.discovery.probe import backward_error

    columns = constant_reads(target, names)
    masks = mask_names(target, names)
    thresholded = thresholded_names(target, names)
    masks -= {n for n, a in zip(names, found.args)  # a checked gradient across the threshold
              if n in thresholded and getattr(a, "requires_grad", False)}
    notes = [f"{n} last size {k}: forward reads only {n}[..., 0..{k - 1}]"
             for n, k in columns.items()] + [f"{n} 0/1: forward uses it as a mask" for n in masks]
    if not notes:
        return found
    args = _shaped(found.args, names, columns, masks)
    if args is found.args or not _runs(call, args, backward_error):
        return found
    variants = tuple(replace(v, args=shaped) for v in found.variants
                     if _runs(call, shaped := _shaped(v.args, names, columns, masks),
                              backward_error))
    description = found.description
    for name, new in zip(names, args):  # `z: float64 (3, 4)` names the shape now given
        if name in columns and hasattr(new, "shape"):
            description = re.sub(rf"\b{re.escape(name)}: (\w+) \([^)]*\)",
                                 rf"{name}: \1 {tuple(new.shape)}", description, count=1)
    shaped = replace(found, args=args, variants=variants, description=description)
    return with_note(shaped, "; ".join(notes))


def _runs(call: Any, args: tuple, backward_error) -> bool:
    try:
        call(*args)
    except Exception:  # noqa: BLE001 - user code: any error means these inputs do not suit it
        return False
    return backward_error(call, args) is None


def _shaped(args: tuple, names: list[str], columns: dict, masks: set) -> tuple:
    """``args`` with each mask made 0/1 (both values) and each constant-read tensor cut to
    its column count; ``args`` itself when nothing changes."""
    import torch

    out = list(args)
    for i, (name, value) in enumerate(zip(names, args)):
        if not (isinstance(value, torch.Tensor) and value.is_floating_point()):
            continue
        if name in masks and value.numel() >= 2:
            bits = (torch.arange(value.numel()) % 2).reshape(value.shape)
            out[i] = bits.to(value.dtype).requires_grad_(value.requires_grad)
        elif name in columns and value.dim() >= 1 and value.shape[-1] > columns[name]:
            cut = value.detach()[..., :columns[name]].clone()
            out[i] = cut.requires_grad_(value.requires_grad)
    return args if all(a is b for a, b in zip(out, args)) else tuple(out)
