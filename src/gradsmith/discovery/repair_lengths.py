"""A length check's error, ``Expected 7, got 8``, read at its raise site (private).

The message alone does not say which argument is 8 long. The code that raised does::

    length = self.sig.shape[1]
    if length != sig_len:
        raise ValueError(name + " is of incorrect length. Expected " + str(sig_len) + ...)

:func:`lengths` finds the ``if`` that guards the failing ``raise``, the side of its comparison
that holds the "got" value, and where that value came from (``x.shape[k]``, ``x.size(k)``,
``len(x)``, directly or through one assignment in the same function); when ``x`` is one of
forward's tensors, that dimension is made the expected length. Nothing of the user's is
called: names and attributes are read from the frame. Used by :mod:`.repair_rules`.
"""

from __future__ import annotations

import ast
import inspect
import re
from typing import Any

from gradsmith.discovery.repair_kinds import Edit
from gradsmith.discovery.source import parse_code

__all__ = ["lengths"]

_SAID = re.compile(r"[Ee]xpected (?:length |size )?(\d+),? (?:but )?got (?:length |size )?(\d+)")
_NONE = object()


def lengths(exc: BaseException, args: list, said: str) -> list[Edit]:
    """Edits making the tensor whose length the failing check compared the expected length."""
    import torch

    if not (m := _SAID.search(str(exc))):
        return []
    want, got = int(m[1]), int(m[2])
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None or want == got or not 0 < want <= 4096:
        return []
    frame = tb.tb_frame
    if (parsed := parse_code(frame.f_code)) is None:
        return []
    tree, start = parsed
    line = tb.tb_lineno - start + 1
    out = []
    for side in _compared(tree, line):
        for source in [side, *_assigned(tree, side)]:
            found = _dimension(source, frame.f_locals)
            if found is None:
                continue
            tensor, dim = found
            index = next((i for i, a in enumerate(args) if a is tensor), None)
            if index is None or not isinstance(tensor, torch.Tensor) or tensor.dim() == 0 \
                    or not -tensor.dim() <= dim < tensor.dim() or tensor.shape[dim] != got:
                continue
            shape = list(tensor.shape)
            shape[dim] = want
            out.append(Edit(index, "shape", tuple(shape), f"{said}: dimension {dim % len(shape)}"
                            f" made {want}"))
    return list(dict.fromkeys(out))[:2]


def _compared(tree: ast.AST, line: int) -> list[ast.expr]:
    """Both sides of the ``!=``/``==`` comparison of the ``if`` whose body raises on ``line``."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.If):
            continue
        raises = [s for s in node.body if isinstance(s, ast.Raise)
                  and s.lineno <= line <= (s.end_lineno or s.lineno)]
        test = node.test.operand if isinstance(node.test, ast.UnaryOp) and isinstance(
            node.test.op, ast.Not) else node.test
        if raises and isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(
                test.ops[0], (ast.NotEq, ast.Eq)):
            return [test.left, test.comparators[0]]
    return []


def _assigned(tree: ast.AST, side: ast.expr) -> list[ast.expr]:
    """What a plain name on the comparison was assigned in the same function."""
    if not isinstance(side, ast.Name):
        return []
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == side.id for t in n.targets)]


def _dimension(expr: ast.expr, local: dict) -> tuple[Any, int] | None:
    """``(object, dim)`` for ``x.shape[k]``, ``x.size(k)``, ``len(x)`` with ``x`` read from
    ``local`` (a name or attributes of a name), else None."""
    if isinstance(expr, ast.Subscript) and isinstance(expr.value, ast.Attribute) \
            and expr.value.attr == "shape" and (k := _int(expr.slice)) is not None:
        held = _read(expr.value.value, local)
        return None if held is _NONE else (held, k)
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) \
            and expr.func.attr == "size" and len(expr.args) == 1 \
            and (k := _int(expr.args[0])) is not None:
        held = _read(expr.func.value, local)
        return None if held is _NONE else (held, k)
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "len" \
            and len(expr.args) == 1:
        held = _read(expr.args[0], local)
        return None if held is _NONE else (held, 0)
    return None


def _int(node: ast.expr) -> int | None:
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return value if type(value) is int else None


def _read(expr: ast.expr, local: dict) -> Any:
    """The value of a name or ``name.attr.attr`` from ``local`` (``self.sig``), else _NONE."""
    if isinstance(expr, ast.Name):
        return local.get(expr.id, _NONE)
    if isinstance(expr, ast.Attribute):
        owner = _read(expr.value, local)
        if owner is _NONE:
            return _NONE
        try:
            return inspect.getattr_static(owner, expr.attr)
        except AttributeError:
            return _NONE
    return _NONE
