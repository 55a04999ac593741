"""What a forward's branches and raising guards say about its parameters (private).

Two facts synthesis reads from the tests a forward makes, never by running it:

- a **float mode selector**: a parameter compared for equality with float literals in a
  branch's test (``if nu == 0.5: ... elif nu == 1.5:``) selects a formula; it is a Python
  float, first the first value compared, each other one tried as a variant;
- a **size-1 dimension**: a guard that raises unless a dimension is 1
  (``if lengthscale.size(-1) > 1: raise ValueError(...)``, ``assert x.shape[-1] == 1``)
  states that dimension; the tensor gets size 1 there (and is tried first with every
  dimension 1: a single value broadcast against the others, what such a guard allows).

Comparisons inside expressions (``torch.where(x == 0.5, ...)``) are not branches and say
nothing here: only the test of an ``if``, ``elif``, conditional expression or ``assert``.
A parameter raised as a power of two (``2 ** bits``, ``1 << bits``) is a number of bits, an
int. A number the code uses as a small positive regulariser or threshold (``x / (x**2 + eps)``,
``clamp(min=eps)``, ``abs(x) < cutoff``) is read by :mod:`~gradsmith.discovery.regularisers`.
"""

from __future__ import annotations

import ast
import math
from typing import Any

from gradsmith.discovery.regularisers import read_regularisers
from gradsmith.discovery.source import parse


def read_guards(fn: Any, hints: dict) -> None:
    """Add float selectors (``kind``/``literals``) and size-1 dimensions (``unit_dims``) to
    ``hints`` (name -> :class:`~gradsmith.discovery.hints.Hint`) from ``fn``'s source.

    Example:
        >>> from gradsmith.discovery.hints import Hint
        >>> def forward(ctx, x, scale, nu):
        ...     if scale.size(-1) > 1:
        ...         raise ValueError("one scale only")
        ...     return x / scale if nu == 0.5 else (x / scale) ** 2
        >>> hints = {n: Hint() for n in ("x", "scale", "nu")}
        >>> read_guards(forward, hints)
        >>> hints["scale"].unit_dims, hints["nu"].kind, hints["nu"].literals
        ({-1}, 'float', [0.5])
    """
    tree = parse(fn)
    if tree is None:
        return
    for node in ast.walk(tree):
        if isinstance(node, (ast.If, ast.IfExp, ast.While)):
            _selectors(node.test, hints)
        if isinstance(node, ast.If) and _raises(node.body):
            _unit_dims(node.test, hints, raising_when_true=True)
            _sign(node.test, hints, holds=False)
        elif isinstance(node, ast.Assert):
            _selectors(node.test, hints)
            _unit_dims(node.test, hints, raising_when_true=False)
            _sign(node.test, hints, holds=True)
        elif isinstance(node, ast.Call) and _called(node.func) == "_assert" and node.args:
            _sign(node.args[0], hints, holds=True)  # torch._assert(torch.all(x <= 0), msg)
        if isinstance(node, ast.BinOp):
            bit_count(node, hints)
    read_regularisers(fn, hints)  # x / (x**2 + eps) in backward: eps small and positive


def _called(func: ast.AST) -> str | None:
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)


# A comparison with 0 (parameter on the left) and the values for which it holds.
_SIGNS = {ast.Lt: (-math.inf, 0.0), ast.LtE: (-math.inf, 0.0),
          ast.Gt: (0.0, math.inf), ast.GtE: (0.0, math.inf)}
_FLIPPED = {ast.Lt: ast.Gt, ast.LtE: ast.GtE, ast.Gt: ast.Lt, ast.GtE: ast.LtE}
_NEGATED = {ast.Lt: ast.GtE, ast.LtE: ast.Gt, ast.Gt: ast.LtE, ast.GtE: ast.Lt}


def _sign(test: ast.AST, hints: dict, holds: bool) -> None:
    """A sign a guard states: ``assert x < 0``, ``torch._assert(torch.all(x <= 0), ...)``,
    ``if (x > 0).any(): raise`` (``holds``: the test must hold; else it raises when true).
    The parameter's values are made inside it (quantlib: clip_lo "is not negative")."""
    while isinstance(test, ast.Call) and _called(test.func) in ("all", "any"):
        test = test.args[0] if test.args else test.func.value  # torch.all(t), t.all()
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return
    op, left, right = type(test.ops[0]), test.left, test.comparators[0]
    if isinstance(left, ast.Constant):
        left, right, op = right, left, _FLIPPED.get(op, op)
    if not (isinstance(left, ast.Name) and left.id in hints and isinstance(right, ast.Constant)
            and right.value == 0 and op in _SIGNS):
        return
    if not holds:  # raising when x > 0: x <= 0 is what passes
        op = _NEGATED[op]
    hint = hints[left.id]
    if hint.domain is None:
        hint.domain = _SIGNS[op]
        hint.domain_why = "a guard states its sign"


def bit_count(node: ast.BinOp, hints: dict) -> None:
    """``2 ** bits`` or ``1 << bits``: a number of bits, a positive int (CompressAI's QReLU
    clamps to ``2 ** bit_depth - 1``; a float tensor -0.86 there made the range empty and
    forward a constant). ``2 ** (bits - 1)``, a signed format's half range, counts the
    same (WAGE's ``round(x * 2 ** (k - 1))``: a float tensor ``k`` quantised on a grid of
    random steps)."""
    base = node.left.value if isinstance(node.left, ast.Constant) else None
    power = isinstance(node.op, ast.Pow) and base in (2, 2.0) and type(base) is not bool
    shift = isinstance(node.op, ast.LShift) and base == 1 and type(base) is int
    exponent = node.right
    if (isinstance(exponent, ast.BinOp) and isinstance(exponent.op, (ast.Add, ast.Sub))
            and isinstance(exponent.right, ast.Constant) and type(exponent.right.value) is int):
        exponent = exponent.left  # 2 ** (bits - 1)
    name = exponent.id if isinstance(exponent, ast.Name) else None
    if (power or shift) and name in hints and hints[name].kind is None:
        hints[name].kind, hints[name].count = "int", True


def _raises(body: list[ast.stmt]) -> bool:
    return any(isinstance(s, ast.Raise) for s in body)


def _tests(test: ast.AST):
    """The comparisons a test is made of (through ``and``/``or``/``not``)."""
    if isinstance(test, ast.BoolOp):
        for value in test.values:
            yield from _tests(value)
    elif isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        yield from _tests(test.operand)
    elif isinstance(test, ast.Compare) and len(test.ops) == 1:
        yield test


def _selectors(test: ast.AST, hints: dict) -> None:
    for compare in _tests(test):
        if not isinstance(compare.ops[0], (ast.Eq, ast.NotEq)):
            continue
        left, right = compare.left, compare.comparators[0]
        for name, other in ((left, right), (right, left)):
            if (isinstance(name, ast.Name) and name.id in hints
                    and isinstance(other, ast.Constant) and type(other.value) is float):
                hint = hints[name.id]
                if hint.kind in (None, "float"):
                    hint.kind = "float"
                    if other.value not in hint.literals:
                        hint.literals.append(other.value)


def _dimension(node: ast.AST, hints: dict) -> tuple[str, int] | None:
    """``x.size(i)``, ``x.shape[i]``: the parameter and the (constant) dimension."""
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "size" and len(node.args) == 1):
        owner, index = node.func.value, node.args[0]
    elif (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute)
          and node.value.attr == "shape"):
        owner, index = node.value.value, node.slice
    else:
        return None
    value = _constant_int(index)
    if isinstance(owner, ast.Name) and owner.id in hints and value is not None:
        return owner.id, value
    return None


def _constant_int(node: ast.AST) -> int | None:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _constant_int(node.operand)
        return None if inner is None else -inner
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


# Comparisons with the constant 1 that hold exactly when the dimension is not 1 (raise then)
# or exactly when it is (an assert), keyed by (operator, dimension on the left).
_NOT_ONE = {(ast.Gt, True), (ast.NotEq, True), (ast.Lt, False), (ast.NotEq, False)}
_IS_ONE = {(ast.Eq, True), (ast.Eq, False), (ast.LtE, True), (ast.GtE, False)}


def _unit_dims(test: ast.AST, hints: dict, raising_when_true: bool) -> None:
    """A dimension the guard requires to be 1: ``if x.size(-1) > 1: raise`` (any part of an
    ``or``: each alone raises) or ``assert x.size(-1) == 1`` (any part of an ``and``)."""
    joined = isinstance(test, ast.BoolOp)
    if joined and isinstance(test.op, ast.And) == raising_when_true:
        return  # `if a and b: raise` needs both: neither alone is required
    parts = test.values if joined else [test]
    for part in parts:
        if not (isinstance(part, ast.Compare) and len(part.ops) == 1):
            continue
        for dim_node, other, left in ((part.left, part.comparators[0], True),
                                      (part.comparators[0], part.left, False)):
            found = _dimension(dim_node, hints)
            if found is None or _constant_int(other) != 1:
                continue
            wanted = _NOT_ONE if raising_when_true else _IS_ONE
            if (type(part.ops[0]), left) in wanted:
                hints[found[0]].unit_dims.add(found[1])
