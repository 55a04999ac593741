"""Sizes forward states in terms of another tensor's sizes (private; read into hints).

A rotary embedding's caches are half as wide as the part of the heads they rotate::

    _, seqlen, _, headdim = x.shape
    rotary_seqlen, rotary_dim = cos.shape
    rotary_dim *= 2
    assert rotary_dim <= headdim
    assert sin.shape == (rotary_seqlen, rotary_dim // 2)

Every layout gave ``cos`` the width of ``x`` (or an unrelated one), so ``rotary_dim <=
headdim`` failed on all of them and the Function was skipped (corpus 13d's DeepLinkExt
``ApplyRotaryEmbTorch``). Names bound from ``t.shape`` (unpacking, ``t.shape[i]``,
``t.size(i)``) are followed through ``*=``, ``*`` and ``//`` by constants; a comparison of two
such sizes of different tensors with different factors (``2 * cos[-1] <= x[-1]``) makes the
first the second's size times the ratio (equality: the largest the guard allows, the whole
head rotated); ``q.shape == (a, b // 2)`` with the sizes of one tensor makes ``q`` that
tensor's shape; ``three == 3`` fixes the dimension it was read from. Only these relations are
read: other guards stay with the layouts that already meet them.
"""

from __future__ import annotations

import ast
from fractions import Fraction

# name -> candidate (parameter, dimension, factor) it stands for: size(parameter, dim) * factor
_Env = dict[str, list[tuple[str, int, Fraction]]]


def read_scaled_sizes(tree: ast.AST, hints: dict) -> None:
    """Record ``scaled``, ``same_as`` and ``sized_dims`` on the hints of ``tree``'s
    parameters (``hints``: name -> Hint)."""
    env: _Env = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            _bind(node.targets[0], node.value, env, hints)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            k = _const(node.value)
            name = node.target.id
            if k and name in env and isinstance(node.op, (ast.Mult, ast.FloorDiv)):
                f = k if isinstance(node.op, ast.Mult) else 1 / k
                env[name] = [(p, d, g * f) for p, d, g in env[name]]
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            _compare(node, env, hints)


def _bind(target: ast.expr, value: ast.expr, env: _Env, hints: dict) -> None:
    if isinstance(target, ast.Tuple) and (owner := _shape_of(value, hints)) is not None:
        elts = target.elts
        star = next((i for i, e in enumerate(elts) if isinstance(e, ast.Starred)), None)
        for i, e in enumerate(elts):
            if isinstance(e, ast.Name) and (star is None or i > star):
                env[e.id] = [(owner, i - len(elts), Fraction(1))]
    elif isinstance(target, ast.Name) and (sizes := _sizes(value, env, hints)):
        env[target.id] = sizes


def _shape_of(node: ast.expr, hints: dict) -> str | None:
    """``t.shape`` or ``t.size()`` of a parameter ``t``."""
    if isinstance(node, ast.Call) and not node.args and isinstance(node.func, ast.Attribute) \
            and node.func.attr == "size":
        node = node.func
    if isinstance(node, ast.Attribute) and node.attr in ("shape", "size") and \
            isinstance(node.value, ast.Name) and node.value.id in hints:
        return node.value.id
    return None


def _sizes(node: ast.expr, env: _Env, hints: dict) -> list[tuple[str, int, Fraction]]:
    """What an expression of sizes stands for (several where an ``a if c else b`` chooses)."""
    if isinstance(node, ast.Name):
        return env.get(node.id, [])
    if isinstance(node, ast.IfExp):
        return _sizes(node.body, env, hints) + _sizes(node.orelse, env, hints)
    if isinstance(node, ast.Subscript) and (owner := _shape_of(node.value, hints)) is not None \
            and (d := _int(node.slice)) is not None:
        return [(owner, d, Fraction(1))]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr == "size" and len(node.args) == 1 and \
            isinstance(node.func.value, ast.Name) and node.func.value.id in hints and \
            (d := _int(node.args[0])) is not None:
        return [(node.func.value.id, d, Fraction(1))]
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.FloorDiv)):
        for left, right in ((node.left, node.right), (node.right, node.left)):
            if (k := _const(right)) and (isinstance(node.op, ast.Mult) or left is node.left):
                f = k if isinstance(node.op, ast.Mult) else 1 / k
                return [(p, d, g * f) for p, d, g in _sizes(left, env, hints)]
    return []


def _compare(node: ast.Compare, env: _Env, hints: dict) -> None:
    sides = [node.left, *node.comparators]
    if all(isinstance(op, ast.Eq) for op in node.ops):  # a.shape == b.shape == (s, d // 2)
        for t in (s for s in sides if isinstance(s, ast.Tuple)):
            for q in filter(None, (_shape_of(s, hints) for s in sides)):
                _same_shape(q, t, env, hints)
    for (a, b), op in zip(zip(sides, sides[1:]), node.ops):
        if isinstance(op, (ast.GtE, ast.Gt)):
            a, b = b, a
        elif not isinstance(op, (ast.LtE, ast.Lt, ast.Eq)):
            continue
        if isinstance(op, ast.Eq) and (k := _int(b)) is not None and k > 0:
            for p, d, f in _sizes(a, env, hints):
                if f == 1 and d >= 0:  # three = qkv.shape[2]; assert three == 3
                    hints[p].sized_dims[d] = k
            continue
        if isinstance(op, ast.Eq) and any(isinstance(s, ast.Tuple) for s in (a, b)):
            continue  # read above
        small, big = _sizes(a, env, hints), _sizes(b, env, hints)
        if len(small) == 1 and len(big) == 1 and small[0][0] != big[0][0] and \
                small[0][2] != big[0][2] and small[0][1] < 0 and big[0][1] < 0:
            (p, dp, fp), (x, dx, fx) = small[0], big[0]
            hints[p].scaled = (x, dx, dp, fx / fp)  # size(p, dp) = size(x, dx) * fx / fp


def _same_shape(q: str, elts: ast.Tuple, env: _Env, hints: dict) -> None:
    """``sin.shape == (rotary_seqlen, rotary_dim // 2)``: every item a size of one other
    tensor, in order, unscaled: ``sin`` is shaped like it."""
    found = [_sizes(e, env, hints) for e in elts.elts]
    if not found or any(len(f) != 1 or f[0][2] != 1 for f in found):
        return
    owners = {f[0][0] for f in found}
    dims = [f[0][1] for f in found]
    n = len(dims)
    if len(owners) == 1 and (p := owners.pop()) != q and dims == list(range(-n, 0)):
        hints[q].same_as = p


def _const(node: ast.expr) -> Fraction | None:
    k = _int(node)
    return Fraction(k) if k else None


def _int(node: ast.expr) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and \
            (k := _int(node.operand)) is not None:
        return -k
    return None
