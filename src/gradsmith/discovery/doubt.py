"""Whether a backward-error on synthesised inputs is the Function's or the inputs' (private).

Synthesis keeps the first inputs on which forward runs; when backward then raises on every
layout and plan tried, the error is reported only when the inputs are of the kinds the code
states. Two kinds of error say the inputs may be at fault instead, and make the row a skip
with the reason and a decorator to fill in:

- an error about a value's kind (a tensor tested for truth, a float subscripted) where some
  argument's kind was a guess;
- an index out of range where forward turns an argument's values into integers
  (``(knots.view(-1, 1) + floored).long()``): the synthesised values were never shown to be
  valid indices for the other arguments;
- an integer kind needed where a float was given ("only integers ... are valid indices (got
  float)", "expected scalar type Long") where some tensor backward gives no gradient was
  synthesised as float64 by guess (a ``lengths`` no use showed to be integers);
- a complex gradient for a real input where forward's outputs are complex on the real inputs
  (``linalg.eig`` of a real matrix): backward is written for complex inputs, whose structure
  (normal, unitary) the code does not state; a real-input Function's backward that forgets
  ``.real`` behind real outputs stays a ``backward-error``. Synthesis first retries such
  inputs as complex normal (unitary) matrices (:mod:`~gradsmith.discovery.complex_matrices`):
  this doubt remains only where forward or backward rejects those too;
- a shape error where forward only saves some synthesised tensors for backward, never
  computing with them (:mod:`~gradsmith.discovery.saved_only`): forward never tested their
  shapes, so backward is the first to read them.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from gradsmith.discovery.probe import Raised, complex_of_real
from gradsmith.discovery.saved_only import saved_only
from gradsmith.discovery.slots import _TENSOR_NAMES, Slot, _table_value
from gradsmith.discovery.source import parse as _parse
from gradsmith.discovery.suggestion import no_inputs_reason

# Errors about a value's kind, not its shape or contents: a tensor tested for truth or used as
# an index, a number subscripted or called. Only a value of the wrong kind raises them.
_KIND_ERROR = re.compile(
    r"Boolean value of Tensor with more than one value is ambiguous"
    r"|only (?:one element tensors|integer tensors of a single element) can be converted"
    r"|'(?:float|int|bool|str|tuple|list|Tensor|SimpleNamespace|SyntheticFn)' object "
    r"(?:is not|has no|does not|cannot)"
    r"|must be \w+(?:, not| not) (?:float|int|bool|Tensor)"
    r"|unsupported operand type")


def doubt(fn: Any, raised: str, slots: list[Slot], hints: dict, given: set[str]) -> str:
    """Why a backward-error on these inputs is not shown to be the Function's: backward raised
    on every layout tried, with an error about a value's kind (``if ctx.flag:`` on a tensor,
    ``ctx.table["unit"]`` on a float), and some argument's kind is a guess. Empty otherwise:
    a backward raising on inputs of the kinds the code states (a shape mismatch, a typo) is a
    defect, and stays a ``backward-error``."""
    if INDEX_ERROR.search(raised) and (cast := integer_casts(fn)):
        what = ", ".join(cast)
        return no_inputs_reason(
            fn, f"backward raised on every synthesised layout (first: {raised}), and forward "
            f"turns the values of {what} into integers used as indices: the synthesised values "
            "are not shown to be valid indices, so the error may be the inputs', not the "
            "Function's", slots, hints, lead="the synthesised inputs are not shown to fit")
    if _FLOAT_INDEX.search(raised) and (floats := _float_data(slots, given)):
        what = ", ".join(floats)
        return no_inputs_reason(
            fn, f"backward raised on every synthesised layout (first: {raised}): an integer "
            f"kind was needed where a float was given, and {what} ({'a tensor' if len(floats) == 1 else 'tensors'} "
            "backward gives no gradient) got float64 values by guess: the error may be the "
            "synthesised inputs', not the Function's", slots, hints,
            lead="the synthesised inputs are not shown to fit")
    if complex_of_real(raised):
        return Raised(no_inputs_reason(
            fn, f"backward raised on every synthesised layout (first: {raised}): it returns "
            "complex gradients for the real inputs synthesised, so it is written for complex "
            "inputs, of a structure the code does not state", slots, hints,
            lead="the synthesised inputs are not shown to fit"), complex_of_real=True)
    if _SHAPE_ERROR.search(raised) and (unread := _saved_only(fn, slots, given)):
        what = ", ".join(unread)
        return no_inputs_reason(
            fn, f"backward raised on every synthesised layout (first: {raised}), and forward "
            f"only saves {what} for backward, never computing with {'it' if len(unread) == 1 else 'them'}: "
            "nothing checked the synthesised shapes before backward read them, so the error "
            "may be the inputs', not the Function's", slots, hints,
            lead="the synthesised inputs are not shown to fit")
    if not _KIND_ERROR.search(raised):
        return ""  # shapes, values, a ctx typo: what backward does with inputs of these kinds
    tensors = [s for s in slots if s.kind == "tensor"]
    guessed = [s.name for s in slots if s.name not in given and (
        s.hint is None or s.hint.kind is None) and (
        s.kind == "tensor" and s is not tensors[0] and s.name not in _TENSOR_NAMES
        or s.kind in ("value", "scalar") and not isinstance(s.value, bool) and
        _table_value(s.name) is None)]
    if not guessed:
        return ""
    what = ", ".join(guessed)
    return no_inputs_reason(
        fn, f"backward raised on every synthesised layout (first: {raised}), and nothing in the "
        f"code says what {what} {'is' if len(guessed) == 1 else 'are'}: the error may be the "
        "synthesised inputs', not the Function's", slots, hints,
        lead="the synthesised inputs are not shown to fit")


# Errors about sizes and ranks: raised by a tensor's shape, not by its kind or values.
_SHAPE_ERROR = re.compile(r"too many indices for tensor|size|shape|dimension|must match|"
                          r"cannot be multiplied|broadcast")


def _saved_only(fn: Any, slots: list[Slot], given: set[str]) -> list[str]:
    """Synthesised tensors (the first left out: its layout is the one tried) that forward
    only saves for backward, so no shape of them was ever tested before backward's."""
    tensors = [s.name for s in slots if s.kind == "tensor"]
    return [n for n in saved_only(fn) if n in tensors[1:] and n not in given]


# torch's refusal of a cotangent that depends on the eigenvectors' arbitrary phase (linalg.eig's
# own backward, called by a Function's): a property of the check's random cotangent, not a defect.
_PHASE_ERROR = "specified up to multiplication by e^{i phi}"


def phase_doubt(fn: Any, errors: list[tuple[str, str]]) -> str:
    """Why a check's error findings (``(code, message)`` pairs) on synthesised inputs are not
    the Function's: every one is a backward-error raised by torch's eigenvector phase check,
    which refuses the random cotangent the check gives complex eigenvectors. Empty otherwise."""
    if not errors or any(code != "backward-error" or _PHASE_ERROR not in message
                         for code, message in errors):
        return ""
    return no_inputs_reason(
        fn, "backward raised torch's eigenvector phase error on the synthesised inputs: the "
        "random cotangent the check gives complex eigenvectors depends on their arbitrary "
        "phase, so the error is the check's, not the Function's", [], {},
        lead="the synthesised inputs are not shown to fit")


# A float where an integer kind is needed: an index, a count, a length (only a value of an
# integer dtype avoids it, whatever its shape or contents).
_FLOAT_INDEX = re.compile(
    r"are valid indices \(got float|tensors used as indices must be long"
    r"|expected scalar type (?:Long|Int) but found"
    r"|to have one of the following scalar types: Long")


def _float_data(slots: list[Slot], given: set[str]) -> list[str]:
    """Float tensors synthesis gave by guess: not the caller's, and not differentiated by
    backward (a differentiated tensor is the Function's own float input), so their dtype is
    the only thing that made them floats; an index-kind hint would have made them int64."""
    return [s.name for s in slots if s.kind == "tensor" and s.frozen and s.name not in given]


# An index outside its tensor: raised by the values of an index, not by backward's formula.
#: An index out of range: about values (indices), though its message names a dimension.
INDEX_ERROR = re.compile(r"index -?\d+ is out of bounds|out of range for|index out of range")
_INTEGER_CASTS = {"long", "int", "short"}


def integer_casts(fn: Any) -> list[str]:
    """Parameters of ``fn``'s forward whose values forward casts to integers (``x.long()``,
    ``(x + y).int()``, ``x.to(torch.long)``), in order.

    Example:
        >>> import torch
        >>> class Spline(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x, knots):
        ...         return x[(knots.view(-1) + x.floor()).long()]
        >>> integer_casts(Spline)
        ['x', 'knots']
    """
    forward = vars(fn).get("forward") if isinstance(fn, type) else fn
    forward = getattr(forward, "__func__", forward)
    tree = _parse(forward) if forward is not None else None
    if tree is None:
        return []
    params = [a.arg for a in next(n for n in ast.walk(tree)
                                  if isinstance(n, ast.FunctionDef)).args.args]
    found: list[str] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        to_int = node.func.attr in _INTEGER_CASTS and not node.args or node.func.attr == "to" \
            and any(isinstance(a, ast.Attribute) and a.attr in ("long", "int64", "int32")
                    for a in node.args)
        if to_int:
            for sub in ast.walk(node.func.value):
                if isinstance(sub, ast.Name) and sub.id in params and sub.id not in found:
                    found.append(sub.id)
    return [p for p in params if p in found]
