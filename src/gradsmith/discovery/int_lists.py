"""Lists of integers the code reads as dimensions, per-dimension cuts or cut points (private).

``forward(ctx, dims, cuts, x)`` looping ``for n, axis in enumerate(dims)`` over
``x.shape[axis]`` with ``cut = cuts[n]`` takes a list of dimensions and a list of one integer
per dimension; ``torch.tensor_split(x, points, dim)`` takes sorted cut points. Synthesis made
them float tensors and every layout failed (``assert cut % 2 == 0``, "step must be greater
than zero"): a skip. Read, never run, from forward's source (helpers defined inside it
included):

- **dimensions**: a parameter a ``for`` loop walks (directly, through ``enumerate``,
  ``reversed`` or a slice ``dims[::-1]``) whose item is used as a dimension somewhere in
  forward (``t.shape[axis]``, ``t.size(axis)``, ``dim=axis``): ``[-1]``, the last dimension of
  every tensor;
- **one integer per dimension**: a parameter subscripted with that loop's counter
  (``cuts[n]``, ``cuts[-1 - n]``) or walked beside it (``zip(dims, cuts)``): ``[2]``, then
  ``[0]`` and ``[1]`` (a cut, a width, a "0 means the middle" convention: the first value on
  which forward runs wins, as for the layouts);
- **cut points**: the indices of ``torch.tensor_split``: ``[1, 2]``, sorted and below the size
  of every dimension the layouts give.

:func:`with_int_lists` makes the plans; :func:`explained` says in the Inputs column why.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from gradsmith.discovery.slots import Slot
from gradsmith.discovery.source import parse

AXES, PER_AXIS, POINTS, RANGES = "axes", "per-axis", "points", "ranges"
_CANDIDATES = {AXES: ([-1],), PER_AXIS: ([2], [0], [1]), POINTS: ([1, 2],),
               RANGES: ([(0, 1), (2, 3)],)}
_WHY = {AXES: "dimensions: forward loops over them as tensor dimensions",
        PER_AXIS: "one integer per dimension in {axes}: forward reads it beside each",
        POINTS: "sorted cut points below each dimension's size: forward tensor_splits at them",
        RANGES: "(start, stop) pairs: forward slices with each item it walks"}
_DIM_KEYWORDS = {"dim", "axis", "dims", "axes"}


def int_lists(fn: Any, names: list[str]) -> dict[str, tuple[str, str]]:
    """Parameter -> (``axes`` | ``per-axis`` | ``points``, the axes parameter for
    ``per-axis``), for the parameters of ``fn`` (a forward) the code reads as integer lists.

    Example:
        >>> def forward(ctx, dims, cuts, x):
        ...     for n, axis in enumerate(dims):
        ...         x = x.narrow(axis, 0, x.shape[axis] - cuts[n])
        ...     return x
        >>> int_lists(forward, ["dims", "cuts", "x"])
        {'dims': ('axes', ''), 'cuts': ('per-axis', 'dims')}
    """
    tree = parse(fn)
    if tree is None:
        return {}
    params = set(names)
    dims_used = _used_as_dims(tree)
    found: dict[str, tuple[str, str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.For):
            _loop(node, params, dims_used, found)
        elif isinstance(node, ast.Call) and _called(node) == "tensor_split":
            args = node.args[1:] if _is_torch_call(node) else node.args
            if args and isinstance(args[0], ast.Name) and args[0].id in params:
                found.setdefault(args[0].id, (POINTS, ""))
    return found


def with_int_lists(plans: list[list[Slot]], lists: dict[str, tuple[str, str]]
                   ) -> list[list[Slot]]:
    """Each plan with the integer lists set, once per candidate value (first candidates
    first)."""
    if not lists:
        return plans
    longest = max(len(_CANDIDATES[kind]) for kind, _ in lists.values())
    out = []
    for i in range(longest):
        for plan in plans:
            out.append([Slot(s.name, "value", list(_pick(lists[s.name][0], i)), s.hint,
                             frozen=True) if s.name in lists else s for s in plan])
    return out


def explained(description: str, lists: dict[str, tuple[str, str]]) -> str:
    """The Inputs column with the reason after each integer list."""
    for name, (kind, axes) in lists.items():
        why = _WHY[kind].format(axes=axes)
        description = re.sub(rf"\b({re.escape(name)}=\[[-\d, ()]*\])", rf"\1 ({why})",
                             description, count=1)
    return description


def _pick(kind: str, i: int) -> list[int]:
    candidates = _CANDIDATES[kind]
    return candidates[min(i, len(candidates) - 1)]


def _loop(node: ast.For, params: set[str], dims_used: set[str],
          found: dict[str, tuple[str, str]]) -> None:
    source, counter, item = _walked(node)
    if source in params and _slices_with(node, item):
        found.setdefault(source, (RANGES, ""))
    if source in params and item in dims_used:
        found.setdefault(source, (AXES, ""))
        if counter is not None:
            for sub in ast.walk(node):
                if (isinstance(sub, ast.Subscript) and isinstance(sub.value, ast.Name)
                        and sub.value.id in params - {source}
                        and not isinstance(sub.slice, ast.Slice)  # blocks[2 * n:]: a slice
                        and any(isinstance(n, ast.Name) and n.id == counter
                                for n in ast.walk(sub.slice))):
                    found.setdefault(sub.value.id, (PER_AXIS, source))
    zipped = node.iter
    if isinstance(zipped, ast.Call) and _called(zipped) == "zip" and isinstance(
            node.target, ast.Tuple) and len(node.target.elts) == len(zipped.args):
        names = [_param(a, params) for a in zipped.args]
        items = [t.id if isinstance(t, ast.Name) else None for t in node.target.elts]
        axes = [n for n, it in zip(names, items) if n is not None and it in dims_used]
        for n in names:
            if axes and n is not None and n not in axes:
                found.setdefault(axes[0], (AXES, ""))
                found.setdefault(n, (PER_AXIS, axes[0]))


def _slices_with(node: ast.For, item: str | None) -> bool:
    """Whether the loop's body slices with its item as a (start, stop) pair: ``slice(*slc)``
    (corpus 12a dev, spent: yastn's block kernels), or ``x[s:e]`` for ``for s, e in ...``."""
    target = node.target
    pair = [e.id for e in target.elts if isinstance(e, ast.Name)] if isinstance(
        target, ast.Tuple) and len(target.elts) == 2 else []
    for sub in (n for stmt in node.body for n in ast.walk(stmt)):
        if item and isinstance(sub, ast.Call) and _called(sub) == "slice" and len(
                sub.args) == 1 and isinstance(sub.args[0], ast.Starred) and isinstance(
                sub.args[0].value, ast.Name) and sub.args[0].value.id == item:
            return True
        if len(pair) == 2 and isinstance(sub, ast.Slice) and [
                getattr(sub.lower, "id", None), getattr(sub.upper, "id", None)] == pair:
            return True
    return False


def _walked(node: ast.For) -> tuple[str | None, str | None, str | None]:
    """(the parameter a loop walks, its counter's name, its item's name)."""
    it, target, counter = node.iter, node.target, None
    if isinstance(it, ast.Call) and _called(it) == "enumerate" and it.args:
        it = it.args[0]
        if isinstance(target, ast.Tuple) and len(target.elts) == 2:
            counter = target.elts[0].id if isinstance(target.elts[0], ast.Name) else None
            target = target.elts[1]
    if isinstance(it, ast.Call) and _called(it) == "reversed" and it.args:
        it = it.args[0]
    if isinstance(it, ast.Subscript) and isinstance(it.slice, ast.Slice):
        it = it.value
    source = it.id if isinstance(it, ast.Name) else None
    item = target.id if isinstance(target, ast.Name) else None
    return source, counter, item


def _used_as_dims(tree: ast.AST) -> set[str]:
    """Names used as a tensor dimension anywhere: ``t.shape[a]``, ``t.size(a)``, ``dim=a``."""
    used: set[str] = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute)
                and node.value.attr == "shape" and isinstance(node.slice, ast.Name)):
            used.add(node.slice.id)
        elif isinstance(node, ast.Call):
            if _called(node) == "size" and node.args and isinstance(node.args[0], ast.Name):
                used.add(node.args[0].id)
            used |= {k.value.id for k in node.keywords
                     if k.arg in _DIM_KEYWORDS and isinstance(k.value, ast.Name)}
    return used


def _param(node: ast.AST, params: set[str]) -> str | None:
    return node.id if isinstance(node, ast.Name) and node.id in params else None


def _called(node: ast.Call) -> str | None:
    f = node.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None


def _is_torch_call(node: ast.Call) -> bool:
    return isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) \
        and node.func.value.id == "torch"
