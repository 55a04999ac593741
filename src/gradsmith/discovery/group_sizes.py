"""Tensors whose last dimension has a fixed size the code slices (private).

Some Functions act on vectors of a fixed length packed in the last dimension: a quaternion
(4), a rigid motion as translation and quaternion (7), a similarity (8), a point (3). Their
code slices fixed pieces off that dimension (``X[..., :3]``, ``X[..., 3:]``) and passes them
to helpers that want exactly that many values, so none of the generic layouts runs them.
When the forward, its backward or a module-level helper they call slices the last dimension
at a constant (read from the code, never by running it), synthesis tries each tensor as a
batch of such vectors, of every last size from 3 to 8 in turn, and keeps the first sizes on
which forward *and* backward run (a size that only lets forward run is not what the code is
written for). The Inputs column names the sizes and why.
"""

from __future__ import annotations

import ast
import inspect
import itertools
from typing import Any

from gradsmith.discovery.source import parse as _parse

#: Last sizes tried for each tensor, smallest first (points, quaternions, ..., Sim(3)).
SIZES = tuple(range(3, 9))
#: At most this many combinations (the tensors' sizes) are tried.
_MOST = 216
#: The leading (batch) dimension of every tensor.
BATCH = 3


def slices_last_dim(owner: Any) -> bool:
    """True when ``owner``'s forward or backward, or a module-level function either calls by
    name, slices the last dimension at a constant: ``X[..., :3]``, ``X[..., 3:]``.

    Example:
        >>> import torch
        >>> def rot(q):
        ...     return q[..., :3] * q[..., 3:]
        >>> class Act(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, q):
        ...         return rot(q)
        >>> slices_last_dim(Act), slices_last_dim(torch.autograd.Function)
        (True, False)
    """
    if not isinstance(owner, type):
        return False
    for method in ("forward", "backward"):
        fn = vars(owner).get(method)
        fn = getattr(fn, "__func__", fn)
        tree = _parse(fn) if fn is not None else None
        if tree is None:
            continue
        if _constant_slice(tree):
            return True
        scope = getattr(fn, "__globals__", {})
        for name in _called_names(tree):
            helper = scope.get(name)
            if inspect.isfunction(helper) and _constant_slice(_parse(helper)):
                return True
    return False


def constant_reads(target: Any, names: list[str]) -> dict[str, int]:
    """The arguments of ``target`` (a forward) whose every read is ``name[..., i]`` at constant
    indices ``0..k-1`` (a complex number as (real, imag)), each with ``k``: the last size the code
    is written for (more columns would get gradients the code never gives them).

    Example:
        >>> import torch
        >>> def modulus(z, w):
        ...     return torch.sqrt(z[..., 0] ** 2 + z[..., 1] ** 2) * w
        >>> constant_reads(modulus, ["z", "w"])
        {'z': 2}
    """
    tree = _parse(target)
    if tree is None:
        return {}
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = {}
    for name in names:
        loads = [n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == name
                 and isinstance(n.ctx, ast.Load)]
        indices = [_last_index(n, parents.get(n)) for n in loads if not _saved(parents.get(n))]
        if indices and None not in indices and set(indices) == set(range(max(indices) + 1)):
            found[name] = max(indices) + 1
    return found


def _saved(parent: ast.AST | None) -> bool:
    """``parent`` is ``ctx.save_for_backward(...)``: keeping a tensor is not reading it."""
    return (isinstance(parent, ast.Call) and isinstance(parent.func, ast.Attribute)
            and parent.func.attr == "save_for_backward")


def _last_index(node: ast.Name, parent: ast.AST | None) -> int | None:
    """``i`` when ``node`` is read as ``node[..., i]`` (``i`` a constant >= 0), else None."""
    if not (isinstance(parent, ast.Subscript) and parent.value is node
            and isinstance(parent.slice, ast.Tuple) and len(parent.slice.elts) == 2):
        return None
    first, last = parent.slice.elts
    if (isinstance(first, ast.Constant) and first.value is Ellipsis
            and isinstance(last, ast.Constant) and type(last.value) is int and last.value >= 0):
        return last.value
    return None


def _called_names(tree: ast.AST) -> set[str]:
    return {node.func.id for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}


def _constant_slice(tree: ast.AST | None) -> bool:
    """``x[..., :3]``, ``x[..., 3:]`` or ``g[..., :-1]`` somewhere in ``tree``."""
    if tree is None:
        return False
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Tuple)):
            continue
        items = node.slice.elts
        if (len(items) == 2 and isinstance(items[0], ast.Constant)
                and items[0].value is Ellipsis and isinstance(items[1], ast.Slice)
                and any(_int_constant(b) for b in (items[1].lower, items[1].upper))):
            return True
    return False


def _int_constant(node: ast.AST | None) -> bool:
    """``3`` or ``-1``."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    return isinstance(node, ast.Constant) and type(node.value) is int


def sized_layouts(n_tensors: int):
    """Layouts of ``n_tensors`` batches of vectors, ``(BATCH, size)`` each, every combination
    of :data:`SIZES` (the first tensor's size varying slowest), at most ``_MOST`` of them.

    Example:
        >>> list(sized_layouts(2))[:3]
        [((3, 3), (3, 3)), ((3, 3), (3, 4)), ((3, 3), (3, 5))]
    """
    combos = itertools.product(SIZES, repeat=max(n_tensors, 1))
    for sizes in itertools.islice(combos, _MOST):
        yield tuple((BATCH, size) for size in sizes)


def sized_inputs(on_layout, plans: list) -> Any:
    """The first inputs on which forward and backward run with tensors as batches of vectors
    (:func:`sized_layouts`), trying each plan in turn, with variants that keep those sizes and
    a note saying why; None when there are none. ``on_layout(slots, layout)`` probes one
    layout (forward and backward) and returns inputs or why it failed."""
    from dataclasses import replace

    from gradsmith.discovery.placement import with_note

    for slots in [p for i, p in enumerate(plans) if p not in plans[:i]]:
        tensors = [s for s in slots if s.kind in ("tensor", "none")]
        if not tensors or any(s.kind == "none" for s in tensors):
            continue
        for layout in sized_layouts(len(tensors)):
            found = on_layout(slots, layout)
            if not isinstance(found, str):
                kept = tuple(v for v in found.variants if _keeps_sizes(v.args, layout))
                return with_note(replace(found, variants=kept),
                                 _note([s.name for s in tensors], layout))
    return None


def same_last_sizes(found: Any, call: Any) -> Any:
    """``found`` without the variants that change a tensor's last size and on which
    backward raises (the "other shapes" variant resizes every dimension; code slicing fixed
    pieces off the last one then raises for a reason no caller meets)."""
    from dataclasses import replace

    from gradsmith.discovery.probe import backward_error

    layout = [tuple(a.shape) for a in found.args if _is_float_tensor(a)]
    kept = tuple(v for v in found.variants if _keeps_sizes(v.args, layout)
                 or backward_error(call, v.args) is None)
    return found if len(kept) == len(found.variants) else replace(found, variants=kept)


def _is_float_tensor(value: Any) -> bool:
    import torch

    return isinstance(value, torch.Tensor) and value.is_floating_point()


def _keeps_sizes(args: tuple, layout) -> bool:
    """True when each tensor in ``args`` has the last size ``layout`` gives it (a variant
    that resizes the vectors is not what the code is written for)."""
    tensors = [a for a in args if _is_float_tensor(a)]
    return all(t.dim() >= 1 and len(shape) >= 1 and t.shape[-1] == shape[-1]
               for t, shape in zip(tensors, layout))


def _note(names: list[str], layout) -> str:
    """What the Inputs column says about the sizes chosen."""
    sizes = ", ".join(f"{n} {shape[-1]}" for n, shape in zip(names, layout))
    return (f"last dimension {sizes}: the code slices fixed pieces off the last dimension "
            "and forward and backward run only at these sizes")

