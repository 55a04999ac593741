"""Bisection brackets (private): a target inside the bracket forward halves.

A forward that finds ``x`` with ``f(x) = y`` by bisection reads its arguments as a contract:
``c = (a + b) / 2``, ``mask = f(c) < y``, ``a = torch.where(mask, c, a)``,
``b = torch.where(mask, b, c)`` needs ``f(a) <= y <= f(b)``. Independent random ``a``, ``b``
and ``y`` break it at most elements: the root is then outside ``[a, b]``, forward returns an
end of the bracket whatever ``y`` is, and a correct implicit-function backward looks like a
straight-through estimator (corpus 7's zuko ``Bisection``). Read from forward's body, never
from names: the two arguments averaged into a midpoint and replaced by it under
``torch.where``, the callable argument called on the midpoint, and the argument its value is
compared with. Inputs then keep the bracket's ends (ordered so that ``f`` is below ``y`` at the
end the code moves up, around 0 and 1 to 2 wide: scaled inputs keep the root inside) and take ``y = f(a + u (b - a))``, ``u`` in
``[0.3, 0.7]``, computed with the callable synthesised for ``f``: the root is inside by
construction. Kept only when forward and backward run on them; the Inputs column says so.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, replace
from typing import Any

from gradsmith.discovery.formula_domains import _number
from gradsmith.discovery.source import parse as _parse


@dataclass(frozen=True)
class Bracket:
    """The arguments of a bisection: ``fn(x) = target`` is solved between ``low`` (where
    ``fn`` is below ``target``) and ``high``."""

    fn: str
    target: str
    low: str
    high: str


def bisection_bracket(target: Any, names: list[str]) -> Bracket | None:
    """The bisection ``target``'s body runs over its arguments, or None.

    Example:
        >>> import torch
        >>> def solve(f, y, a, b):
        ...     for _ in range(20):
        ...         c = (a + b) / 2
        ...         below = f(c) < y
        ...         a = torch.where(below, c, a)
        ...         b = torch.where(below, b, c)
        ...     return c
        >>> bisection_bracket(solve, ["f", "y", "a", "b"])
        Bracket(fn='f', target='y', low='a', high='b')
    """
    tree = _parse(target)
    if tree is None:
        return None
    params = set(names)
    mids = {node.targets[0].id: pair for node in ast.walk(tree)
            if isinstance(node, ast.Assign) and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and (pair := _midpoint(node.value, params)) is not None}
    if not mids:
        return None
    tests = {node.targets[0].id: node.value for node in ast.walk(tree)
             if isinstance(node, ast.Assign) and len(node.targets) == 1
             and isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Compare)}
    for node in ast.walk(tree):
        where = _where_update(node)
        if where is None:
            continue
        moved, test, mid, other = where
        if mid not in mids or moved not in mids[mid] or other != moved:
            continue
        compare = tests.get(test) if isinstance(test, str) else test
        read = _compared(compare, mid, params) if compare is not None else None
        if read is None:
            continue
        fn, y, below = read
        rest = [n for n in mids[mid] if n != moved]
        if len(rest) != 1:
            continue
        low, high = (moved, rest[0]) if below else (rest[0], moved)
        return Bracket(fn, y, low, high)
    return None


def _midpoint(node: ast.AST, params: set[str]) -> tuple[str, str] | None:
    """``(a, b)`` of ``(a + b) / 2``, ``(a + b) * 0.5`` or ``0.5 * (a + b)`` over arguments."""
    if not isinstance(node, ast.BinOp):
        return None
    half = None
    if isinstance(node.op, ast.Div) and _number(node.right) == 2:
        half = node.left
    elif isinstance(node.op, ast.Mult):
        if _number(node.right) == 0.5:
            half = node.left
        elif _number(node.left) == 0.5:
            half = node.right
    if not (isinstance(half, ast.BinOp) and isinstance(half.op, ast.Add)
            and isinstance(half.left, ast.Name) and isinstance(half.right, ast.Name)):
        return None
    pair = (half.left.id, half.right.id)
    return pair if set(pair) <= params and pair[0] != pair[1] else None


def _where_update(node: ast.AST) -> tuple[str, Any, str, str] | None:
    """``(a, test, c, a)`` of ``a = torch.where(test, c, a)`` (``test`` a name or a
    comparison)."""
    if not (isinstance(node, ast.Assign) and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Call)):
        return None
    call = node.value
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if name != "where" or len(call.args) != 3:
        return None
    test, mid, other = call.args
    if not (isinstance(mid, ast.Name) and isinstance(other, ast.Name)):
        return None
    test = test.id if isinstance(test, ast.Name) else test
    return node.targets[0].id, test, mid.id, other.id


def _compared(node: ast.AST, mid: str, params: set[str]) -> tuple[str, str, bool] | None:
    """``(f, y, below)`` of ``f(c) < y`` (``below``: true when ``f(c)`` is below ``y``),
    also written ``y > f(c)``, ``<=`` or ``>=``; None for anything else."""
    if not (isinstance(node, ast.Compare) and len(node.ops) == 1):
        return None
    left, right, op = node.left, node.comparators[0], node.ops[0]
    if not isinstance(op, (ast.Lt, ast.LtE, ast.Gt, ast.GtE)):
        return None
    below = isinstance(op, (ast.Lt, ast.LtE))
    if isinstance(right, ast.Call):
        left, right, below = right, left, not below
    if not (isinstance(left, ast.Call) and isinstance(left.func, ast.Name)
            and left.func.id in params and isinstance(right, ast.Name) and right.id in params
            and any(isinstance(a, ast.Name) and a.id == mid for a in left.args)):
        return None
    return left.func.id, right.id, below


def bracketed(found: Any, call: Any, target: Any, names: list[str]) -> Any:
    """``found`` (synthesised inputs) with its target inside the bracket forward bisects,
    variants alike, when forward and backward run on them; else ``found``."""
    from gradsmith.discovery.placement import with_note
    from gradsmith.discovery.probe import probe

    bracket = bisection_bracket(target, names)
    if bracket is None:
        return found
    args = _inside(found.args, names, bracket, found.seed)
    if args is None or probe(call, list(args), backward=True) is not True:
        return found
    variants = tuple(replace(v, args=inside) for v in found.variants
                     if (inside := _inside(v.args, names, bracket, found.seed)) is not None
                     and probe(call, list(inside), backward=True) is True)
    b = bracket
    note = (f"{b.target} = {b.fn}({b.low} + u ({b.high} - {b.low})), u in [0.3, 0.7]: forward "
            f"bisects [{b.low}, {b.high}] for {b.fn}(x) = {b.target}, so the root is inside")
    return with_note(replace(found, args=args, variants=variants), note)


def _inside(args: tuple, names: list[str], bracket: Bracket, seed: int) -> tuple | None:
    """``args`` with the bracket around 0, 1 to 2 wide, and the target ``f`` of a point
    inside it; None when the arguments are not a callable and three float tensors of one
    shape, or ``f`` fails on them."""
    import torch

    at = {name: i for i, name in enumerate(names[:len(args)])}
    if not all(n in at for n in (bracket.fn, bracket.target, bracket.low, bracket.high)):
        return None
    fn, y, a, b = (args[at[n]] for n in (bracket.fn, bracket.target, bracket.low, bracket.high))
    tensors = (y, a, b)
    if not callable(fn) or not all(isinstance(t, torch.Tensor) and t.is_floating_point()
                                   for t in tensors) or len({t.shape for t in tensors}) != 1:
        return None
    gen = torch.Generator().manual_seed(seed + 7)
    u = 0.3 + 0.4 * torch.rand(y.shape, generator=gen, dtype=torch.float64).to(y.dtype)
    try:
        with torch.no_grad():
            # around 0: still a bracket of the root when a check scales every input
            # (robustness's 300 x), which a bracket beside 0 would not be; 1 to 2 wide
            # whatever the values' scale, the width a bisection's iteration count is set for
            lo = -(0.5 + torch.minimum(a, b).abs().clamp_max(0.5))
            hi = 0.5 + torch.maximum(a, b).abs().clamp_max(0.5)
            up = fn(lo) <= fn(hi)  # the end where f is below the target is the one moved up
            low, high = torch.where(up, lo, hi), torch.where(up, hi, lo)
            value = fn(low + u * (high - low))
    except Exception:  # noqa: BLE001 - user or synthesised callable: keep the inputs as found
        return None
    if not isinstance(value, torch.Tensor) or value.shape != y.shape:
        return None
    out = list(args)
    out[at[bracket.low]] = low.detach().clone().requires_grad_(a.requires_grad)
    out[at[bracket.high]] = high.detach().clone().requires_grad_(b.requires_grad)
    out[at[bracket.target]] = value.detach().to(y.dtype).clone().requires_grad_(y.requires_grad)
    return tuple(out)

