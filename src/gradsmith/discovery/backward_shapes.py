"""The rank backward unpacks from a tensor's shape, carried back to forward's input (private).

``bsz, d_model, seq_len = grad.size()`` in backward says the gradient of the output has three
dimensions; forward's ``return z1.clone()`` says the output is shaped like ``z1``, so ``z1``
needs rank 3. Synthesis read such unpacking in forward only and gave ``z1`` a (3, 4) tensor:
backward raised ``not enough values to unpack (expected 3, got 2)`` on every layout that
forward alone accepted (corpus 8a's mdeq gradient-injection ``Backward``). Read here from
backward, through the gradient of each output (the input forward returns as it is, or
computed elementwise from it), through what forward saves (``ctx.save_for_backward(z)`` ...
``z, = ctx.saved_tensors``) and what it keeps on ctx (``ctx.z = z``). Subscripts count
too: ``T[:, :, :3, :3]`` in backward needs ``T`` of rank 4 (corpus 11a's pytorch_kinematics
``_FKAnalyticalBackward`` got a (3, 4) tensor and raised ``too many indices``).
"""

from __future__ import annotations

import ast
from typing import Any

from gradsmith.discovery.matrices import _saved_aliases
from gradsmith.discovery.source import parse

# Methods that keep the shape of the tensor they are called on.
_SAME_SHAPE = {"clone", "contiguous", "detach", "float", "double", "half", "to", "abs", "neg",
               "exp", "log", "sigmoid", "tanh", "relu", "clamp", "mul", "div", "add", "sub",
               "pow", "sign", "round", "view_as", "reshape_as", "type_as", "requires_grad_"}
_SAME_SHAPE_FUNCTIONS = _SAME_SHAPE - {"view_as", "reshape_as", "type_as", "requires_grad_"}


def read_backward_ranks(owner: type | None, hints: dict[str, Any]) -> None:
    """Raise ``hints[name].rank_min`` to the number of sizes backward unpacks from the shape
    of ``name``'s tensor, its gradient (through an output shaped like it), a saved copy or a
    ctx attribute (the names beside a starred one count as a lower bound), and to the number
    of dimensions backward subscripts in one of them (``T[:, :, :3, 3]``: four; ``None`` and
    ``...`` take none).

    Example:
        >>> import torch
        >>> from gradsmith.discovery.hints import Hint
        >>> class Inject(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, z):
        ...         return z.clone()
        ...     @staticmethod
        ...     def backward(ctx, grad):
        ...         bsz, d, length = grad.size()
        ...         return grad
        >>> hints = {"z": Hint()}
        >>> read_backward_ranks(Inject, hints)
        >>> hints["z"].rank_min
        3
    """
    found = backward_locals(owner, hints)
    if found is None:
        return
    forward, backward, local = found
    grads = _grad_names(backward)
    for i, name in enumerate(_shaped_like(forward, hints)):
        if name is not None and i < len(grads):
            local.setdefault(grads[i], name)
    for node in ast.walk(backward):  # z = ctx.z
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(
                node.targets[0], ast.Name) and dotted(node.value) in local:
            local.setdefault(node.targets[0].id, local[dotted(node.value)])
    for node in ast.walk(backward):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], (ast.Tuple, ast.List))):
            continue
        value = node.value.func if isinstance(node.value, ast.Call) and not (
            node.value.args or node.value.keywords) else node.value
        if not (isinstance(value, ast.Attribute) and value.attr in ("shape", "size")):
            continue
        name = local.get(dotted(value.value))
        if name is not None:
            rank = sum(not isinstance(e, ast.Starred) for e in node.targets[0].elts)
            hints[name].rank_min = max(hints[name].rank_min, rank)
    for node in ast.walk(backward):  # R = T[:, :, :3, :3]: T has at least four dimensions
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Tuple) and (
                name := local.get(dotted(node.value))) is not None:
            rank = sum(not (isinstance(e, ast.Constant) and e.value in (None, Ellipsis))
                       for e in node.slice.elts)
            hints[name].rank_min = max(hints[name].rank_min, rank)


def kept_on_ctx(forward: ast.AST, hints: dict[str, Any]) -> dict[str, str]:
    """``ctx.z`` (as the dotted name backward reads) -> the parameter forward keeps there."""
    kept: dict[str, str] = {}
    for node in ast.walk(forward):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and \
                node.value.id in hints:
            for target in node.targets:
                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
                    kept[f"{target.value.id}.{target.attr}"] = node.value.id
    return kept


def _grad_names(backward: ast.AST) -> list[str]:
    """Backward's gradient parameters, one per output (``ctx`` left out)."""
    function = backward.body[0] if getattr(backward, "body", None) else None
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return []
    return [a.arg for a in function.args.args[1:]]


def _shaped_like(forward: ast.AST, hints: dict[str, Any]) -> list[str | None]:
    """Per output of forward's last ``return``, the parameter it is shaped like, if any."""
    returns = [n for n in ast.walk(forward) if isinstance(n, ast.Return) and n.value is not None]
    if not returns:
        return []
    value = returns[-1].value
    outputs = value.elts if isinstance(value, ast.Tuple) else [value]
    assigned = {t.id: n.value for n in ast.walk(forward) if isinstance(n, ast.Assign)
                for t in n.targets if isinstance(t, ast.Name)}
    return [_root(o, hints, assigned) for o in outputs]


def _root(node: ast.AST, hints: dict[str, Any], assigned: dict[str, ast.AST],
          depth: int = 0) -> str | None:
    """The parameter whose rank ``node`` keeps: ``z``, ``z.clone()``, ``torch.tanh(z)``,
    ``2 * z``, ``z @ w`` (the left operand), or a local name assigned one of those."""
    if depth > 4:
        return None
    if isinstance(node, ast.Name):
        if node.id in hints:
            return node.id
        return _root(assigned[node.id], hints, assigned, depth + 1) \
            if node.id in assigned else None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.func.attr in _SAME_SHAPE and not _is_namespace(node.func.value):
            return _root(node.func.value, hints, assigned, depth + 1)
        if node.func.attr in _SAME_SHAPE_FUNCTIONS and node.args:
            return _root(node.args[0], hints, assigned, depth + 1)
    if isinstance(node, ast.BinOp):
        sides = [_root(s, hints, assigned, depth + 1) for s in (node.left, node.right)]
        if isinstance(node.left, ast.Constant):  # 2 * z: the tensor's shape
            return sides[1]
        # z / 3, z * s, and z @ w: the left operand's rank (tokens times a weight); a guess,
        # which costs a probe when wrong (the layouts are also tried as they are)
        return sides[0] if sides[0] is not None else sides[1]
    return None


def _is_namespace(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id in ("torch", "F", "np", "math")


def dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return f"{node.value.id}.{node.attr}"
    return None


def backward_locals(owner: type | None, hints: dict[str, Any]
                    ) -> tuple[ast.AST, ast.AST, dict[str, str]] | None:
    """Forward's and backward's parsed source and backward's names for forward's parameters
    (unpacked from ``ctx.saved_tensors`` or kept as ``ctx.name``); None without both sources."""
    if owner is None:
        return None
    forward = parse(getattr(owner, "forward", None))
    backward = parse(getattr(owner, "backward", None))
    if forward is None or backward is None:
        return None
    local = _saved_aliases(forward, backward, hints)
    local.update(kept_on_ctx(forward, hints))
    return forward, backward, local
