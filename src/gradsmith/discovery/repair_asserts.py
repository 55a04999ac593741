"""A failed ``assert`` in forward, read as what it asks of an argument (private).

``assert b.shape == (B, M, 1)`` raises an AssertionError with no message: the failing line and
the frame's own values say what ``b`` should be. Used by :mod:`.repair_rules`; nothing of the
user's is called (the right side is evaluated from ints, names and shapes only).
"""

from __future__ import annotations

import ast
import linecache
from typing import Any

__all__ = ["asserted"]


def asserted(exc: BaseException, args: list) -> list[tuple[int, tuple[int, ...], str]]:
    """``assert b.shape == (B, M, 1)``, ``assert x.dim() == 3``, ``assert w.size(0) == n``
    failed: ``(index, shape, why)`` of the argument it tests, made as the test asks (its right
    side evaluated with the frame's own values)."""
    import torch

    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if not isinstance(exc, AssertionError) or tb is None:
        return []
    frame = tb.tb_frame
    line = linecache.getline(frame.f_code.co_filename, tb.tb_lineno).strip()
    try:
        node = ast.parse(line).body[0]
    except (SyntaxError, IndexError):
        return []
    if not isinstance(node, ast.Assert):
        return []
    tests = node.test.values if isinstance(node.test, ast.BoolOp) and isinstance(
        node.test.op, ast.And) else [node.test]
    scope = {**frame.f_globals, **frame.f_locals}
    said = f"forward's `{line if len(line) <= 90 else line[:87] + '...'}` failed"
    out = []
    for test in tests:
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1
                and isinstance(test.ops[0], ast.Eq)):
            continue
        for side, other in ((test.left, test.comparators[0]), (test.comparators[0], test.left)):
            name, what = _tested(side)
            value = _value(other, scope)
            arg = scope.get(name, _NOTHING)
            index = next((i for i, a in enumerate(args) if a is arg), None)
            if index is None or value is None or not isinstance(arg, torch.Tensor):
                continue
            shape = tuple(arg.shape)
            if what == "shape" and isinstance(value, tuple):
                new = value
            elif isinstance(what, int) and isinstance(value, int) and -len(shape) <= what < len(
                    shape):
                new = list(shape)
                new[what] = value
            elif what == "dim" and isinstance(value, int) and 0 <= value <= 6:
                new = (2,) * (value - len(shape)) + shape if value > len(shape) else shape[
                    len(shape) - value:]
            else:
                continue
            if all(isinstance(d, int) and d >= 0 for d in new) and tuple(new) != shape:
                out.append((index, tuple(new), said))
    return out


_NOTHING = object()


def _tested(node: ast.AST) -> tuple[str | None, str | int | None]:
    """``x.shape``/``x.size()``: (x, "shape"); ``x.shape[k]``/``x.size(k)``: (x, k);
    ``x.dim()``/``x.ndim``/``len(x.shape)``: (x, "dim")."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return node.value.id, {"shape": "shape", "ndim": "dim"}.get(node.attr)
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and \
            type(node.slice.value) is int and _tested(node.value)[1] == "shape":
        return _tested(node.value)[0], node.slice.value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(
            node.func.value, ast.Name):
        if node.func.attr == "size" and not node.args:
            return node.func.value.id, "shape"
        if node.func.attr == "size" and len(node.args) == 1 and isinstance(
                node.args[0], ast.Constant) and type(node.args[0].value) is int:
            return node.func.value.id, node.args[0].value
        if node.func.attr in ("dim", "ndimension") and not node.args:
            return node.func.value.id, "dim"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len" \
            and len(node.args) == 1 and _tested(node.args[0])[1] == "shape":
        return _tested(node.args[0])[0], "dim"
    return None, None


def _value(node: ast.AST, scope: dict) -> Any:
    """An int or a tuple of ints from ``node``, with names and shapes read from ``scope``;
    None for anything else (nothing of the user's is called)."""
    import torch

    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.Name):
        value = scope.get(node.id)
        return tuple(value) if isinstance(value, torch.Size) else (
            value if type(value) is int else None)
    if isinstance(node, (ast.Tuple, ast.List)):
        items = [_value(e, scope) for e in node.elts]
        return tuple(items) if all(type(i) is int for i in items) else None
    name, what = _tested(node)
    value = scope.get(name) if name is not None else None
    if isinstance(value, torch.Tensor) and what is not None:
        shape = tuple(value.shape)
        if what == "shape":
            return shape
        if what == "dim":
            return len(shape)
        return shape[what] if -len(shape) <= what < len(shape) else None
    if isinstance(node, ast.BinOp):
        a, b = _value(node.left, scope), _value(node.right, scope)
        if type(a) is int and type(b) is int:
            op = {ast.Add: a + b, ast.Sub: a - b, ast.Mult: a * b}.get(type(node.op))
            return op if op is not None else (a // b if isinstance(node.op, ast.FloorDiv)
                                              and b else None)
    return None
