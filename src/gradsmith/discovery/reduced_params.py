"""Per-channel parameters read from the reductions backward returns for them (private).

A per-channel quantiser's backward returns ``(g * d).sum((0, 2, 3)).reshape(ctx.qshape)`` as the
gradient of its step: the reduction over dimension 3 says the gradient of the output ``g`` (shaped
like the feature) has four dimensions, and reshaping the per-channel sums back to the step's shape
says the step holds one value per kept dimension, ``(1, C, 1, 1)``. Synthesis gave every tensor
the first layout's ``(3, 4)``: backward raised ``Dimension out of range`` on every input set and
the row was a ``backward-error`` instead of an estimator to declare (corpus 12b's spiking
quantisers). Read here, never run: the output-shaped parameter gets that rank, the parameter the
reduction is returned for the same rank with the reduced dimensions of size 1 (``unit_dims``,
which :func:`gradsmith.discovery.layouts.adjusted` applies). Only a reduction that is reshaped
(``reshape``/``view``) or kept (``keepdim=True``) is read: a plain ``sum(0)`` is a per-feature
vector, which :mod:`gradsmith.checker.layout` finds from the gradient's shape.
"""

from __future__ import annotations

import ast
from typing import Any

from gradsmith.discovery.backward_shapes import _grad_names, _shaped_like
from gradsmith.discovery.source import parse

_REDUCTIONS = {"sum", "mean", "amax", "amin"}
_RESHAPES = {"reshape", "view", "view_as", "reshape_as"}
_NAMESPACES = {"torch", "F", "np", "math"}
_KEEP_SHAPE = {"float", "double", "clone", "contiguous", "mul", "div", "add", "sub", "neg", "to",
               "type_as", "detach"}


def read_reduced(owner: type | None, hints: dict[str, Any]) -> None:
    """Give the output-shaped parameter the rank a returned reduction needs, and the parameter
    it is returned for that rank with size 1 in each reduced dimension.

    Example:
        >>> import torch
        >>> from gradsmith.discovery.hints import Hint
        >>> class PerChannel(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x, s):
        ...         ctx.shape = s.shape
        ...         return x.mul(s)
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         gs = (g * 2).sum((0, 2, 3)).reshape(ctx.shape)
        ...         return g, gs
        >>> hints = {"x": Hint(), "s": Hint()}
        >>> read_reduced(PerChannel, hints)
        >>> hints["x"].rank_min, hints["s"].rank_min, sorted(hints["s"].unit_dims)
        (4, 4, [0, 2, 3])
    """
    if owner is None:
        return
    forward = parse(getattr(owner, "forward", None))
    backward = parse(getattr(owner, "backward", None))
    if forward is None or backward is None:
        return
    names = _forward_params(forward, owner)
    grads = dict(zip(_grad_names(backward), _shaped_like(forward, hints)))
    assigned = {t.id: n.value for n in ast.walk(backward) if isinstance(n, ast.Assign)
                and not _is_none(n.value)  # `else: grad_b = None` beside the gradient
                for t in n.targets if isinstance(t, ast.Name)}
    returns = [n.value.elts for n in ast.walk(backward)
               if isinstance(n, ast.Return) and isinstance(n.value, ast.Tuple)]
    shaped: dict[str, str] = {}
    for elements in returns:  # `return g * mask, ...`: that parameter is shaped like g
        for name, element in zip(names, elements):
            grad = _root(element, grads, assigned, strict=True)
            if grad is not None:
                shaped.setdefault(grad, name)
    grads.update(shaped)  # surer than forward's `y * s`, read as shaped like one operand
    for elements in returns:
        for target, element in zip(names, elements):
            found = _reduction(_resolve(element, assigned), assigned)
            grad = _root(found[0], grads, assigned) if found else None
            source = grads.get(grad) if grad is not None else None
            if source is None or source == target or target not in hints or \
                    source not in hints:
                continue
            rank = max(found[1]) + 1
            hints[source].rank_min = max(hints[source].rank_min, rank)
            hints[target].rank_min = max(hints[target].rank_min, rank)
            hints[target].unit_dims.update(found[1])


def _is_none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _forward_params(forward: ast.AST, owner: type) -> list[str]:
    """Forward's parameters backward returns gradients for (``ctx`` left out)."""
    function = forward.body[0] if getattr(forward, "body", None) else None
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return []
    own_setup = any("setup_context" in vars(c) for c in owner.__mro__
                    if not c.__module__.startswith("torch"))
    return [a.arg for a in function.args.args[0 if own_setup else 1:]]


def _resolve(node: ast.AST, assigned: dict[str, ast.AST], depth: int = 0) -> ast.AST:
    """A returned name's value (``grad_gama`` -> what it was assigned), a few steps deep."""
    while isinstance(node, ast.Name) and node.id in assigned and depth < 4:
        node, depth = assigned[node.id], depth + 1
    return node


def _reduction(node: ast.AST, assigned: dict[str, ast.AST]) -> tuple[ast.AST, list[int]] | None:
    """``(reduced, dims)`` for ``e.sum(dims).reshape(...)``, ``e.sum(dims, keepdim=True)`` (also
    times a factor, ``... * gama``), with non-negative literal dimensions; else None."""
    if isinstance(node, ast.BinOp):
        return _reduction(node.left, assigned) or _reduction(node.right, assigned)
    kept = False
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr in _RESHAPES:
        node, kept = _resolve(node.func.value, assigned), True
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in _REDUCTIONS):
        return None
    receiver = node.func.value
    args = list(node.args)
    if isinstance(receiver, ast.Name) and receiver.id in _NAMESPACES:  # torch.sum(e, dims)
        if not args:
            return None
        receiver, args = args[0], args[1:]
    keywords = {k.arg: k.value for k in node.keywords}
    dim = args[0] if args else keywords.get("dim")
    keep = keywords.get("keepdim")
    kept = kept or (isinstance(keep, ast.Constant) and keep.value is True)
    dims = _int_dims(dim)
    return (receiver, dims) if kept and dims else None


def _int_dims(node: ast.AST | None) -> list[int]:
    """Literal dimensions: ``2``, ``(0, 2, 3)``, ``tuple(range(1, 4))``; else empty."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in (
            "tuple", "list") and len(node.args) == 1:
        node = node.args[0]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
            node.func.id == "range" and 1 <= len(node.args) <= 2 and all(
            isinstance(a, ast.Constant) and type(a.value) is int for a in node.args):
        return list(range(*(a.value for a in node.args)))
    items = node.elts if isinstance(node, (ast.Tuple, ast.List)) else [node]
    dims = [e.value for e in items if isinstance(e, ast.Constant) and type(e.value) is int]
    return dims if len(dims) == len(items) and all(d >= 0 for d in dims) else []


def _root(node: ast.AST, grads: dict[str, str | None], assigned: dict[str, ast.AST],
          depth: int = 0, strict: bool = False) -> str | None:
    """The incoming gradient the expression is shaped like: through its name,
    an alias of it, the left (else right) operand of arithmetic, the tensor
    a method is called on, a ``torch.*`` function's first argument. ``strict``: through
    arithmetic and shape-keeping methods only (the expression has the gradient's shape)."""
    if depth > 6 or node is None:
        return None
    deeper = depth + 1
    if isinstance(node, ast.Name):
        if node.id in grads:
            return node.id
        value = assigned.get(node.id)
        return _root(value, grads, assigned, deeper, strict) if value is not None else None
    if isinstance(node, ast.BinOp) and not isinstance(node.op, ast.MatMult):
        return _root(node.left, grads, assigned, deeper, strict) or \
            _root(node.right, grads, assigned, deeper, strict)
    if isinstance(node, ast.UnaryOp):
        return _root(node.operand, grads, assigned, deeper, strict)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        receiver = node.func.value
        if isinstance(receiver, ast.Name) and receiver.id in _NAMESPACES:
            return None if strict or not node.args else \
                _root(node.args[0], grads, assigned, deeper, strict)
        if strict and node.func.attr not in _KEEP_SHAPE:
            return None
        return _root(receiver, grads, assigned, deeper, strict)
    return None
