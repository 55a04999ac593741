"""Grid-sample contracts: a sampling grid and the shape a sampled tensor is built with (private).

``F.grid_sample(x, grid)`` (and ``torch.grid_sampler``, ``grid_sampler_2d``, the aten
``grid_sampler_2d_backward`` an adjoint calls in forward) needs ``grid`` of shape
``(N, H, W, 2)``, its batch that of the sampled tensor (or of the output, for the backward
kernel: ``(N, C, H, W)``), coordinates in [-1, 1]. The layouts tried so far never gave that
(a ``(3, 4)`` grid "expected grid to have size 0 in last dimension"), and an adjoint that
builds the sampled tensor as ``torch.empty(1).broadcast_to(xshape)`` got ``xshape`` as a float
tensor: skips. Read, never run, from forward, setup_context and backward (names assigned a
grid-sampler kernel, ``op = torch.ops.aten.grid_sampler_2d_backward``, count as one):

- :func:`read_grids` marks the parameter passed as the grid: values in (-1, 1) (the Inputs
  column says why) and :func:`grid_layout` gives it ``(2, 4, 5, 2)``, every other tensor
  ``(2, 3, 4, 5)`` (batch 2, 3 channels, a 4 x 5 image);
- :func:`shape_params`: a parameter forward broadcasts, expands or builds a tensor to
  (``broadcast_to(xshape)``, ``torch.zeros(shape)``) and reads as a sequence
  (``xshape[1]``, ``len(xshape)``) is a shape: the first tensor's ``torch.Size``.
"""

from __future__ import annotations

import ast
from typing import Any

from gradsmith.discovery.slots import Slot
from gradsmith.discovery.source import parse

GRID_WHY = "a grid_sample grid: (N, H, W, 2) coordinates in [-1, 1]"
GRID, IMAGE = (2, 4, 5, 2), (2, 3, 4, 5)
_BUILT_TO = {"broadcast_to", "expand", "reshape", "view", "new_empty", "new_zeros",
             "new_ones", "empty", "zeros", "ones"}


def read_grids(target: Any, owner: type | None, hints: dict) -> set[str]:
    """Mark the parameters passed to a grid sampler as its grid in ``hints`` (values in
    (-1, 1), a 4-D grid with 2 coordinates); returns their names.

    Example:
        >>> import torch.nn.functional as F
        >>> from gradsmith.discovery.hints import Hint
        >>> def forward(ctx, x, grid):
        ...     return F.grid_sample(x, grid, align_corners=False)
        >>> hints = {"x": Hint(), "grid": Hint()}
        >>> read_grids(forward, None, hints), hints["grid"].domain
        ({'grid'}, (-1.0, 1.0))
    """
    found: set[str] = set()
    trees = [parse(target)]
    if owner is not None:
        trees += [parse(vars(owner).get("setup_context")), parse(getattr(owner, "backward", None))]
    for tree in trees:
        if tree is not None:
            found |= _grids(tree, set(hints))
    for name in found:
        hint = hints[name]
        hint.kind, hint.domain, hint.domain_why = "tensor", (-1.0, 1.0), GRID_WHY
        hint.rank_min, hint.last_dim = 4, 2
    return found


def grid_layout(slots: list[Slot]) -> tuple[tuple[int, ...], ...] | None:
    """Shapes for a Function with a grid parameter: the grid ``(2, 4, 5, 2)``, every other
    tensor ``(2, 3, 4, 5)``; None when no slot is a grid."""
    tensors = [s for s in slots if s.kind in ("tensor", "none")]
    grids = [s.hint is not None and s.hint.domain_why == GRID_WHY for s in tensors]
    if not any(grids):
        return None
    return tuple(GRID if g else IMAGE for g in grids)


def shape_params(target: Any, names: list[str]) -> set[str]:
    """Parameters forward builds a tensor's shape from and reads as a sequence.

    Example:
        >>> def forward(y, xshape):
        ...     assert xshape[1] == y.shape[1]
        ...     return y.new_zeros(1).broadcast_to(xshape)
        >>> shape_params(forward, ["y", "xshape"])
        {'xshape'}
    """
    tree = parse(target)
    if tree is None:
        return set()
    built, read = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _name(node.func) in _BUILT_TO and len(node.args) == 1 \
                and isinstance(node.args[0], ast.Name) and node.args[0].id in names:
            built.add(node.args[0].id)
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) \
                and not isinstance(node.slice, ast.Slice):
            read.add(node.value.id)
        elif isinstance(node, ast.Call) and _name(node.func) == "len" and node.args \
                and isinstance(node.args[0], ast.Name):
            read.add(node.args[0].id)
    return built & read


def with_shapes(slots: list[Slot], shapes: set[str]) -> list[Slot]:
    """The plan with each shape parameter the first tensor's ``torch.Size``."""
    return [Slot(s.name, "size", None, s.hint) if s.name in shapes else s for s in slots]


def _grids(tree: ast.AST, params: set[str]) -> set[str]:
    kernels = {"grid_sample": 1, "grid_sampler": 1, "grid_sampler_2d": 1}
    aliases: dict[str, int] = {}
    for node in ast.walk(tree):  # op = torch.ops.aten.grid_sampler_2d_backward
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            position = _position(_name(node.value))
            target = node.targets[0]
            alias = target.id if isinstance(target, ast.Name) else \
                target.attr if isinstance(target, ast.Attribute) else None
            if position is not None and alias is not None:
                aliases[alias] = position
    found = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        called = _name(node.func)
        position = aliases.get(called) if called in aliases else _position(called)
        position = kernels.get(called, position)
        grid = next((k.value for k in node.keywords if k.arg == "grid"), None)
        if grid is None and position is not None and len(node.args) > position:
            grid = node.args[position]
        if isinstance(grid, ast.Name) and grid.id in params:
            found.add(grid.id)
    return found


def _position(name: str | None) -> int | None:
    """Where a grid sampler takes its grid: after the input, or after the gradient and the
    input for a backward kernel."""
    if name is None or not name.startswith("grid_sampl"):
        return None
    return 2 if name.endswith("_backward") else 1


def _name(node: ast.AST) -> str | None:
    return node.id if isinstance(node, ast.Name) else \
        node.attr if isinstance(node, ast.Attribute) else None
