"""The kind of value a forward's error asks an argument to be: the rules :mod:`.repair_rules`
applies for numbers and tensors of the wrong kind (private).

A number used as a tensor ("'float' object has no attribute 'shape'"), a tensor used as a
number, an integer, an index, a mask, a complex tensor, a flag autograd must save: each rule
reads one kind of message and proposes an :class:`Edit` for each argument it may be about.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass
from typing import Any

__all__ = ["KIND_RULES", "NOTHING", "Edit", "cached", "identical"]


@dataclass(frozen=True)
class Edit:
    """One change to one argument: ``kind`` is ``shape`` (``value`` a shape: a fresh tensor of
    the argument's dtype), ``number`` (``value`` a Python number or bool), ``index`` (an int64
    tensor of ``value``'s shape in [0, ``high``)), ``mask`` (a bool tensor of that shape),
    ``complex`` (a complex tensor of that shape) or ``wrap`` (``value`` as a tensor).
    ``stated``: a typed signature's parser named the kind, so only the value is a guess."""

    index: int
    kind: str
    value: Any
    why: str
    high: int = 2
    stated: bool = False  # the kind a typed signature states (an argument parser's message)


def identical(args: list, value: Any) -> list[int]:
    """Indices of the arguments that are ``value`` (the object a frame holds)."""
    return [i for i, a in enumerate(args) if a is value and not cached(a)]


NOTHING = object()


def cached(value: Any) -> bool:
    """Objects Python shares between unrelated uses (small ints, bools, None): identity with
    them says nothing about which argument a frame holds."""
    return value is None or isinstance(value, bool) or (type(value) is int and -5 <= value <= 256)


def _number_as_tensor(text, args, tensors, numbers, first, said, line, local) -> list[Edit]:
    """A number where forward wants a tensor: the input's shape, its last dimension, 0-d."""
    if not re.search(r"'(?:float|int)' object has no attribute|must be Tensor, not (?:float|int)"
                     r"|expected Tensor as element|'(?:float|int)' object is not subscriptable"
                     r"|object of type '(?:float|int)' has no len\(\)"
                     r"|unsupported operand type\(s\) for @"
                     r"|invalid combination of arguments - got \(.*Tensor.*float|"
                     r"invalid combination of arguments - got \(.*float.*Tensor", text):
        return []
    out = []
    for i in (i for i in numbers if type(args[i]) is float or "int" in text):
        for shape in dict.fromkeys((first, first[-1:], ())):
            out.append(Edit(i, "shape", shape, f"{said}: a tensor, not a number"))
    return out[:3]


def _as_integer(text, args, tensors, numbers, first, said, line, local) -> list[Edit]:
    """A tensor or float where forward wants an integer (a slice bound, ``range(n)``, a size)
    or an index tensor."""
    out = []
    if re.search(r"tensors used as indices must be long|expected scalar type Long"
                 r"|LongTensor but got|(?:expected|must be) an? (?:long|int64|integer) tensor",
                 text, re.IGNORECASE):  # a guard's own message: `raise TypeError("Expected ...`
        high = max(1, min(first)) if first else 2
        out += [Edit(i, "index", tuple(args[i].shape), f"{said}: an index tensor", high)
                for i in tensors[:2]]
    if re.search(r"only integer tensors of a single element can be converted to an index",
                 text):
        out += [Edit(i, "number", 2, f"{said}: an integer") for i in tensors[:2]]
    if re.search(r"'float' object cannot be interpreted as an integer|must be int, not float"
                 r"|slice indices must be integers|integer argument expected, got float", text):
        out += [Edit(i, "number", 2, f"{said}: an integer") for i in numbers
                if type(args[i]) is float][:2]
    if m := re.search(r"must be a (?:tuple|list) of length (\d+)", text):  # one size per axis
        out += [Edit(i, "number", (max(2, int(args[i])),) * int(m[1]),
                     f"{said}: one per dimension") for i in numbers if type(args[i]) is int][:1]
    if re.search(r"argument after \*\* must be a mapping, not (?:float|int)", text):
        out += [Edit(i, "number", {}, f"{said}: keyword arguments") for i in numbers][:2]
    if re.search(r"must be bool, not (?:float|int)", text):
        out += [Edit(i, "number", flag, f"{said}: a bool") for i in numbers
                if type(args[i]) is float for flag in (False, True)][:2]
    return out


def _as_scalar(text, args, tensors, numbers, first, said, line, local) -> list[Edit]:
    """A tensor with several values where forward wants one: the integer the failing line
    compares it with (``if strategy == 0:`` selects a mode), else 0-d, then a Python float."""
    if not re.search(r"only one element tensors can be converted to Python scalars"
                     r"|a Tensor with \d+ elements cannot be converted to Scalar"
                     r"|Boolean value of Tensor with more than one value is ambiguous", text):
        return []
    out = [Edit(i, "number", int(m[2]), f"{said}: the integer it is compared with")
           for m in re.finditer(r"\b(\w+)\s*==\s*(-?\d+)\b(?!\.)", line)
           for i in identical(args, local.get(m[1], NOTHING)) if i in tensors][:1]
    for i in (i for i in tensors if args[i].numel() > 1):
        out.append(Edit(i, "shape", (), f"{said}: one value"))
    return out[:2] + [Edit(i, "number", 0.5, f"{said}: one value") for i in tensors
                      if args[i].numel() > 1][:1]


def _as_mask(text, args, tensors, numbers, first, said, line, local) -> list[Edit]:
    """A float tensor where forward wants a boolean mask (``torch.where(mask, ...)``)."""
    if not re.search(r"expected condition to be a boolean tensor|only supports boolean masks",
                     text):
        return []
    return [Edit(i, "mask", tuple(args[i].shape), f"{said}: a boolean mask")
            for i in tensors[:2]]


def _saved(text, args, tensors, numbers, first, said, line, local) -> list[Edit]:
    """``ctx.save_for_backward(..., flag)`` with a Python value: that argument as a tensor.
    Autograd raises after forward returned: the names are read from forward's source."""
    m = re.search(r"can only save variables, but argument (\d+) is of type (\w+)", text)
    if not m:
        return []
    forward = getattr(local.get("cls"), "forward", None)
    try:
        source = inspect.getsource(forward)
        params = list(inspect.signature(forward).parameters)[1:]  # ctx is not passed
    except (TypeError, OSError, ValueError):
        return []
    calls = re.findall(r"save_for_backward\(([^()]*)\)", source)
    names = [[n.strip() for n in c.split(",")] for c in calls]
    saved = {n[int(m[1])] for n in names if int(m[1]) < len(n)}
    return [Edit(i, "wrap", args[i], f"{said}: a tensor") for i, p in enumerate(params)
            if p in saved and i < len(args) and isinstance(args[i], (bool, int, float))][:1]


def _as_complex(text, args, tensors, numbers, first, said, line, local) -> list[Edit]:
    """A real tensor where forward wants a complex one (a non-uniform FFT's values; ``x.imag``
    or ``torch.view_as_real(x)`` of a spectrum)."""
    if not re.search(r"dtype of torch\.complex|[Ee]xpected (?:a )?complex|must be complex"
                     r"|with non-complex dtypes|only supported for complex tensors", text):
        return []
    return [Edit(i, "complex", tuple(args[i].shape), f"{said}: complex")
            for i in tensors][:3]


KIND_RULES = (_number_as_tensor, _as_integer, _as_scalar, _as_mask, _saved, _as_complex)
