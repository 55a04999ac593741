"""The domain a forward clamps a tensor argument into before computing with it (private).

``x = x.clamp(-1 + 1e-15, 1 - 1e-15)`` at the top of an ``artanh``, ``x = x.clamp(min=1 +
1e-15)`` in an ``arcosh`` (bounds a hair from a whole number, where the formula is singular): the
code states the domain it is written for and keeps values
outside it from reaching the formula. Random normal inputs put most values outside, where the
clamp makes forward constant while backward (the formula's derivative, right inside) passes a
gradient: a false ``undeclared-estimator``. Read, never run, from forward's body: a parameter
reassigned to its own clamp at constant bounds *and then computed with* (not a clamp that is
the operation itself, ``x = x.clamp(0, 6); return x``, whose mask backward must get right
and the check must exercise) gets values inside the domain, and the Inputs column says so.
``s = torch.where(s > eps, s, eps)`` with ``eps`` a small constant (``torch.tensor(1e-5)``)
reads as ``s.clamp(min=eps)``: a quantiser's step drawn negative was clamped to eps, clipping
every element, so backward's in-range branch was never exercised.
"""

from __future__ import annotations

import ast
import math
from typing import Any

from gradsmith.discovery.source import parse as _parse

_CLAMPS = {"clamp", "clamp_", "clip", "clip_", "clamp_min", "clamp_min_", "clamp_max",
           "clamp_max_"}
_BOOKKEEPING = {"save_for_backward", "mark_dirty", "mark_non_differentiable"}


def clamped_domains(forward: Any, names: list[str]) -> dict[str, tuple[float, float]]:
    """name -> (low, high) (``-inf``/``inf`` for an open side) for each parameter forward
    reassigns to its own clamp at constant bounds and then computes with.

    Example:
        >>> def forward(ctx, x, y):
        ...     x = x.clamp(-1 + 1e-15, 1 - 1e-15)
        ...     y = y.clamp(0, 6)
        ...     ctx.save_for_backward(x, y)
        ...     return x.log1p() + y
        >>> clamped_domains(forward, ["x", "y"])
        {'x': (-0.999999999999999, 0.999999999999999)}
    """
    tree = _parse(forward)
    body = next((n.body for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)), []) \
        if tree is not None else []
    found: dict[str, tuple[float, float]] = {}
    consts: dict[str, float] = {}  # eps = torch.tensor(1e-5).float().to(x.device)
    for i, stmt in enumerate(body):
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)):
            continue
        if stmt.targets[0].id not in names:
            if (value := _constant_tensor(stmt.value)) is not None:
                consts[stmt.targets[0].id] = value
            continue
        name = stmt.targets[0].id
        bounds = _clamp_bounds(stmt.value, name) or _where_floor(stmt.value, name, consts)
        if bounds is not None and name not in found and _computed_with(body[i + 1:], name):
            found[name] = bounds
    return found


def _clamp_bounds(node: ast.AST, name: str) -> tuple[float, float] | None:
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in _CLAMPS):
        return None
    args = list(node.args)
    owner = node.func.value
    if isinstance(owner, ast.Name) and owner.id == name:
        pass
    elif isinstance(owner, ast.Name) and owner.id == "torch" and args and \
            isinstance(args[0], ast.Name) and args[0].id == name:
        args = args[1:]
    else:
        return None
    keywords = {k.arg: k.value for k in node.keywords}
    attr = node.func.attr.rstrip("_")
    low_node = keywords.get("min", args[0] if args and attr != "clamp_max" else None)
    high_node = keywords.get("max", args[1] if len(args) > 1 else (
        args[0] if args and attr == "clamp_max" else None))
    low, high = _number(low_node), _number(high_node)
    if (low_node is not None and low is None) or (high_node is not None and high is None):
        return None  # a bound from a variable: not a domain the code states
    low = -math.inf if low is None else low
    high = math.inf if high is None else high
    if not (low < high and any(_near_singular(b) for b in (low, high))):
        return None  # clamp(0, 6) is the operation itself: its mask must be exercised
    return low, high


def _where_floor(node: ast.AST, name: str, consts: dict[str, float]
                 ) -> tuple[float, float] | None:
    """``torch.where(s > eps, s, eps)``: ``s`` kept above a small constant (a step size)."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "where" and len(node.args) == 3 and not node.keywords):
        return None
    test, kept, other = node.args
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1
            and isinstance(test.ops[0], (ast.Gt, ast.GtE)) and isinstance(test.left, ast.Name)
            and test.left.id == name and isinstance(kept, ast.Name) and kept.id == name):
        return None
    low = _number(test.comparators[0]) if not isinstance(test.comparators[0], ast.Name) \
        else consts.get(test.comparators[0].id)
    floor = _number(other) if not isinstance(other, ast.Name) else consts.get(other.id)
    if low is None or floor is None or low != floor or not _near_singular(low):
        return None
    return low, math.inf


def _constant_tensor(node: ast.AST) -> float | None:
    """The value of ``torch.tensor(c)`` (then ``.float()``, ``.to(...)``), or of ``c``."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr in ("float", "double", "to", "cuda", "type_as"):
        node = node.func.value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr == "tensor" and len(node.args) == 1:
        node = node.args[0]
    return _number(node)


def _near_singular(bound: float) -> bool:
    """A bound a hair from a whole number (``1 - 1e-15``, ``1e-6``): the clamp keeps values
    off a singular point (artanh at 1, log at 0), it does not define the output."""
    return math.isfinite(bound) and 0 < abs(bound - round(bound)) < 1e-3


def _number(node: ast.AST | None) -> float | None:
    """The value of a constant expression (``1 - 1e-15``, ``-1.0``), else None."""
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return float(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _number(node.operand)
        return None if inner is None else -inner
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult)):
        left, right = _number(node.left), _number(node.right)
        if left is None or right is None:
            return None
        return {ast.Add: left + right, ast.Sub: left - right,
                ast.Mult: left * right}[type(node.op)]
    return None


def _computed_with(statements: list[ast.stmt], name: str) -> bool:
    """``name`` is an operand of a computation in ``statements`` (not only saved, returned)."""
    for stmt in statements:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call):
                callee = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(
                    node.func, "id", "")
                if callee in _BOOKKEEPING:
                    continue
                operands = [*node.args, node.func.value if isinstance(
                    node.func, ast.Attribute) else None]
                if any(isinstance(a, ast.Name) and a.id == name for a in operands):
                    return True
            elif isinstance(node, (ast.BinOp, ast.UnaryOp)):
                parts = [node.left, node.right] if isinstance(node, ast.BinOp) else [
                    node.operand]
                if any(isinstance(p, ast.Name) and p.id == name for p in parts):
                    return True
    return False


def in_domain(shape: tuple[int, ...], bounds: tuple[float, float], generator: Any) -> Any:
    """float64 values strictly inside ``bounds``: the middle 80% of a finite interval, else
    0.5 to 1.5 away from the one finite side."""
    import torch

    low, high = bounds
    u = torch.rand(shape, dtype=torch.float64, generator=generator)
    if math.isfinite(low) and math.isfinite(high):
        return low + (high - low) * (0.1 + 0.8 * u)
    return low + 0.5 + u if math.isfinite(low) else high - 0.5 - u
