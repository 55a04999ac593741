"""Masks built with Python ``and``/``or`` on tensors: meant elementwise, harm on real inputs.

A binarization's backward writes ``mask1 = input >= -1 and input < 0`` and then
``grad[mask1] = ...``: Python's ``and`` asks each comparison for its truth, which raises
"Boolean value of Tensor with more than one value is ambiguous" for any tensor of more than
one element. Synthesis used to pass over the layouts backward rejected and settle on a 0-d
input, where the line runs, so the row said INCOMPLETE while every real (batched) input raises.
Such a line (a name assigned ``and``/``or`` of comparisons) is no guess of synthesis about the
input's kind: the layout search stops at it, and the error is judged like any backward error
on the inputs the code states (corpus 14 held-out, Optimized-Binarized-Neural-Networks
``Binarization2``).
"""

from __future__ import annotations

import ast
import linecache

AMBIGUOUS = "Boolean value of Tensor with more than one value is ambiguous"


def mask_line(exc: BaseException) -> str:
    """The innermost source line of ``exc``'s traceback when ``exc`` is the ambiguous-truth
    error raised by a mask assignment from ``and``/``or`` of comparisons, else "".

    Example:
        >>> mask_line(RuntimeError("expected scalar type Float"))
        ''
    """
    if AMBIGUOUS not in str(exc):
        return ""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return ""
    line = linecache.getline(tb.tb_frame.f_code.co_filename, tb.tb_lineno).strip()
    return line if is_mask_assignment(line) else ""


def is_mask_assignment(line: str) -> bool:
    """``name = <comparison> and|or <comparison> ...`` (not an ``if`` or ``while`` test, which
    may be written for one value).

    Example:
        >>> is_mask_assignment("mask = x >= -1 and x < 0"), is_mask_assignment("if x > 0:")
        (True, False)
    """
    try:
        node = ast.parse(line).body[0]
    except (SyntaxError, IndexError):
        return False
    return isinstance(node, ast.Assign) and isinstance(node.value, ast.BoolOp) and all(
        isinstance(v, ast.Compare) for v in node.value.values)
