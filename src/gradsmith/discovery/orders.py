"""Integer-valued orders: an argument forward uses as an exponent or a harmonic order and
backward gives no gradient (private).

``x ** k``, ``torch.pow(x, k)``, ``k * atan2(y, x)`` (the phase harmonic ``|z| e^{ik arg z}``,
continuous in ``z`` only for an integer ``k``), ``polygamma(k, x)``, ``mvlgamma(x, p)``: the
argument is an order. When backward also returns no gradient for it (``None``, ``0``,
``torch.zeros_like(k)``), the author treats it as a constant of integer value, and a
differentiable float synthesised for it gets a false ``gradient-mismatch`` (the true derivative
in ``k`` of ``x ** k`` is ``x ** k log x``, which no author of such a backward meant). Such an
argument is synthesised integer-valued (2, 3, 4, ... in its dtype and shape) and not
differentiated; the Inputs column says so and why.

Both facts are needed: a backward that returns zeros for an input used as a plain factor
(``x * w``) is wrong, and still fails; an exponent backward differentiates (``g * x ** k * log
x``) stays a differentiable float. Read, never run; the new inputs are kept only when forward
and backward run on them.
"""

from __future__ import annotations

import ast
import re
from dataclasses import replace
from typing import Any

from gradsmith.discovery.contract import _backward_returns
from gradsmith.discovery.formula_domains import _aliases
from gradsmith.discovery.formula_domains import _param as _through
from gradsmith.discovery.source import call_name, forward_parameters, parse

_ANGLES = {"atan2", "arctan2", "angle"}
_ZEROS = {"zeros_like", "zeros", "new_zeros"}
_SHAPING = {"to", "type", "type_as", "double", "float", "detach", "clone", "unsqueeze",
            "view", "reshape", "expand", "expand_as", "contiguous"}
#: calls whose order is the argument at this position (``polygamma(n, x)``)
_ORDER_AT = {"polygamma": 0, "mvlgamma": 1, "pow": 1, "float_power": 1}


def integer_orders(owner: Any) -> dict[str, str]:
    """Parameters of ``owner`` (a Function class) used as an exponent or an order in forward
    for which backward returns no gradient, each with how forward uses it.

    Example:
        >>> import torch
        >>> class Power(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x, k):
        ...         ctx.save_for_backward(x, k)
        ...         return x ** k
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         x, k = ctx.saved_tensors
        ...         return g * k * x ** (k - 1), torch.zeros_like(k)
        >>> integer_orders(Power)
        {'k': 'an exponent'}
    """
    if not isinstance(owner, type):
        return {}
    params = forward_parameters(owner)
    constant = _no_gradient(owner, params)
    if not constant:
        return {}
    found: dict[str, str] = {}
    for method in ("forward", "setup_context"):
        tree = parse(getattr(owner, method, None))
        if tree is not None:
            for name, how in _orders(tree, {n: n for n in constant}).items():
                found.setdefault(name, how)
    return found


def _no_gradient(owner: type, params: list[str]) -> set[str]:
    """Parameters for whose position every ``return`` of backward is None or zeros."""
    returns = _backward_returns(owner)
    if not returns:
        return set()
    return {p for i, p in enumerate(params)
            if all(i < len(elts) and _zero(elts[i]) for elts in returns)}


def _zero(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return node.value is None or (type(node.value) in (int, float) and node.value == 0)
    return isinstance(node, ast.Call) and call_name(node) in _ZEROS


def _orders(tree: ast.AST, names: dict[str, str]) -> dict[str, str]:
    names = _aliases(tree, names)
    angles = {t.id for node in ast.walk(tree) if isinstance(node, ast.Assign)
              for t in node.targets if isinstance(t, ast.Name) and _is_angle(node.value)}
    found: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
            if (name := _param(node.right, names)) is not None:
                found.setdefault(name, "an exponent")
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            for side, other in ((node.left, node.right), (node.right, node.left)):
                if (name := _param(side, names)) is not None and (
                        _is_angle(other) or (isinstance(other, ast.Name) and other.id in angles)):
                    found.setdefault(name, "a multiple of an angle (a harmonic order)")
        elif isinstance(node, ast.Call):
            callee = call_name(node)
            at = _ORDER_AT.get(callee)
            if callee in ("pow", "float_power") and isinstance(node.func, ast.Attribute) and (
                    _param(node.func.value, names) is None and len(node.args) == 1):
                at = 0  # x.pow(k)
            if "_polynomial_" in callee:
                at = 1  # chebyshev_polynomial_t(x, n): a degree
            if at is not None and at < len(node.args) and (
                    name := _param(node.args[at], names)) is not None:
                found.setdefault(name, "an exponent" if "pow" in callee else "an order")
    return found


def _is_angle(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and call_name(node) in _ANGLES


def _param(node: ast.AST, names: dict[str, str]) -> str | None:
    """The parameter ``node`` stands for, through ``.data`` and shape-changing calls too."""
    return _through(node, names, _SHAPING)


def with_integer_orders(found: Any, call: Any, names: list[str]) -> Any:
    """``found`` (inputs of ``call``, a Function's ``apply``) with each integer-valued order
    (:func:`integer_orders`) made integer-valued and not differentiated (variants alike), when
    forward and backward run on the result; else ``found``."""
    from gradsmith.discovery.masks import _runs
    from gradsmith.discovery.placement import with_note
    from gradsmith.discovery.probe import backward_error

    orders = {n: how for n, how in integer_orders(getattr(call, "__self__", None)).items()
              if n in names}
    if not orders:
        return found
    args = _integral(found.args, names, orders)
    if args is found.args or not _runs(call, args, backward_error):
        return found
    variants = tuple(replace(v, args=fixed) for v in found.variants
                     if _runs(call, fixed := _integral(v.args, names, orders), backward_error))
    changed = [n for n, old, new in zip(names, found.args, args) if old is not new]
    description = found.description
    for name in changed:
        description = re.sub(rf"\b{re.escape(name)}: (\w+) (\([^)]*\))",
                             rf"{name}: \1 \2 integer-valued, no grad", description, count=1)
    notes = [f"{n}: {orders[n]} in forward, no gradient in backward" for n in changed]
    return with_note(replace(found, args=args, variants=variants, description=description),
                     "; ".join(notes))


def _integral(args: tuple, names: list[str], orders: dict[str, str]) -> tuple:
    """``args`` with each order that is a float tensor of other than whole values made 2, 3,
    4, ... (its shape and dtype, no grad); ``args`` itself when nothing changes."""
    import torch

    out = list(args)
    for i, (name, value) in enumerate(zip(names, args)):
        if name in orders and isinstance(value, torch.Tensor) and value.is_floating_point() \
                and not torch.equal(value, value.round()):
            whole = 2 + torch.arange(value.numel(), device=value.device) % 3
            out[i] = whole.reshape(value.shape).to(value.dtype)
    return args if all(a is b for a, b in zip(out, args)) else tuple(out)
