"""Inputs repaired from what forward's error says, when no layout runs (private).

A forward that rejects synthesised inputs usually says what was wrong with them: "The size of
tensor a (8) must match the size of tensor b (3) at non-singleton dimension 1", "'float' object
has no attribute 'shape'", "shape '[-1, 16]' is invalid for input of size 24", "not enough values
to unpack (expected 4, got 2)". :func:`repair` reads the exception of a failed probe, derives a
few targeted changes to the argument list (resize one tensor's dimension to the size the message
names, add or remove leading dimensions, turn a number into a tensor or an integer, a tensor
into a number, make a size divisible), and probes again. A change is kept when forward then
runs, or fails differently (the next error names the next fix); a few rounds, at most
:data:`BUDGET` probes per Function. The arguments the traceback's frames hold (the forward's
own locals, torch's ``input``) are changed first.

Each change says in the Inputs column what it answered, so a user can read why an argument has
the kind or shape it has.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gradsmith.discovery.probe import probe_failure

__all__ = ["BUDGET", "Edit", "Repaired", "edits_for", "repair"]

#: Probes one Function may spend on repairs, the first (failing) probe of each start included.
BUDGET = 12


@dataclass(frozen=True)
class Edit:
    """One change to one argument: ``kind`` is ``shape`` (``value`` a shape: a fresh tensor of
    the argument's dtype), ``number`` (``value`` a Python number or bool) or ``index`` (an int64
    tensor of ``value``'s shape in [0, ``high``))."""

    index: int
    kind: str
    value: Any
    why: str
    high: int = 2


@dataclass(frozen=True)
class Repaired:
    """Arguments forward runs on, what each says (the Inputs column), and the edits made."""

    args: list
    parts: list[str]
    edits: tuple[Edit, ...]


def repair(call: Callable[..., Any], build: Callable[[], tuple[list, list[str]]],
           seed: int, budget: list[int]) -> Repaired | None:
    """Repair the arguments ``build()`` makes until ``call`` runs forward on them, or None.

    Args:
        call: the Function's ``apply`` (or the callable).
        build: fresh arguments and their descriptions (one per argument, same order).
        seed: seed of the tensors the edits make.
        budget: probes left (one element, spent in place: several starts share it).
    """
    edits: list[Edit] = []
    args, parts = _edited(build, edits, seed)
    if budget[0] <= 0:
        return None
    budget[0] -= 1
    _, exc = probe_failure(call, args)
    while budget[0] > 0 and exc is not None:
        for edit in edits_for(exc, args)[:4]:
            if budget[0] <= 0:
                return None
            budget[0] -= 1
            trial, _ = _edited(build, [*edits, edit], seed)
            new_outcome, new_exc = probe_failure(call, trial)
            if new_outcome is True:
                args, parts = _edited(build, [*edits, edit], seed)
                return Repaired(args, parts, (*edits, edit))
            if new_exc is not None and _message(new_exc) != _message(exc) \
                    and not _undoes(edit, args, new_exc, trial):
                edits.append(edit)  # a different error: the next one names the next fix
                args, exc = trial, new_exc
                break
        else:
            return None
    return None


def edits_for(exc: BaseException, args: list) -> list[Edit]:
    """The changes ``exc``'s message asks for, the arguments the traceback holds first.

    Example:
        >>> import torch
        >>> exc = RuntimeError("shape '[-1, 16]' is invalid for input of size 24")
        >>> [(e.index, e.value) for e in edits_for(exc, [torch.zeros(3, 8)])]
        [(0, (3, 16))]
    """
    import torch

    text = _message(exc)
    order = _implicated(exc, args)
    tensors = [i for i in order if isinstance(args[i], torch.Tensor)
               and args[i].is_floating_point()]
    numbers = [i for i in order if type(args[i]) in (float, int)]
    first = next((tuple(args[i].shape) for i in tensors if args[i].dim() > 0), (3, 4))
    said = f"forward raised {type(exc).__name__}: {_short(text)}"
    out: list[Edit] = []
    for rule in _RULES:
        out += rule(text, args, tensors, numbers, first, said)
    return out


def _undoes(edit: Edit, before: list, exc: BaseException, after: list) -> bool:
    """Whether ``exc`` (raised on ``after``, ``before`` with ``edit``) asks to turn the edited
    argument back into the kind it was (a tensor made an int, then "'int' object is not
    subscriptable"): the edit was wrong, not a step forward."""
    import torch

    was_tensor = isinstance(before[edit.index], torch.Tensor)
    if (edit.kind != "number") == was_tensor:  # the same kind, another shape: no turn back
        return False
    return any(e.index == edit.index and (e.kind != "number") == was_tensor
               for e in edits_for(exc, after))


def _edited(build, edits: list[Edit], seed: int) -> tuple[list, list[str]]:
    """Fresh arguments from ``build`` with ``edits`` applied, and their descriptions."""
    import torch

    args, parts = build()
    args, parts = list(args), list(parts)
    for n, edit in enumerate(edits):
        old = args[edit.index]
        name = parts[edit.index].split(":", 1)[0].split("=", 1)[0]
        generator = torch.Generator().manual_seed(seed + 7919 * (n + 1) + edit.index)
        if edit.kind == "shape":
            dtype = old.dtype if isinstance(old, torch.Tensor) and old.is_floating_point() \
                else torch.float64
            grad = old.requires_grad if isinstance(old, torch.Tensor) else True
            args[edit.index] = torch.randn(edit.value, dtype=dtype, generator=generator
                                           ).to(_device(args)).requires_grad_(grad)
            shown = f"{name}: {str(dtype).removeprefix('torch.')} {tuple(edit.value)}"
        elif edit.kind == "index":
            args[edit.index] = torch.randint(0, edit.high, edit.value, generator=generator
                                             ).to(_device(args))
            shown = f"{name}: int64 {tuple(edit.value)} in [0, {edit.high})"
        else:
            args[edit.index] = edit.value
            shown = f"{name}={edit.value!r}"
        parts[edit.index] = f"{shown} (repaired: {edit.why})"
    return args, parts


def _device(args: list) -> Any:
    import torch

    return next((a.device for a in args if isinstance(a, torch.Tensor)), torch.device("cpu"))


def _message(exc: BaseException) -> str:
    text = str(exc)
    return text.splitlines()[0] if text else type(exc).__name__


def _short(text: str) -> str:
    return text if len(text) <= 90 else text[:87] + "..."


def _implicated(exc: BaseException, args: list) -> list[int]:
    """Indices of ``args``, those the traceback's frames hold (innermost first) before the
    others: the arguments the failing line used."""
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    held: list[int] = []
    for frame in reversed(frames[1:]):  # not the probe's own frame
        values = list(frame.f_locals.values())
        for i, a in enumerate(args):
            if i not in held and any(v is a for v in values) and not _cached(a):
                held.append(i)
    return held + [i for i in range(len(args)) if i not in held]


def _cached(value: Any) -> bool:
    """Objects Python shares between unrelated uses (small ints, bools, None): identity with
    them says nothing about which argument a frame holds."""
    return value is None or isinstance(value, bool) or (type(value) is int and -5 <= value <= 256)


# --- rules: message -> edits ------------------------------------------------------------------

def _sizes(text, args, tensors, numbers, first, said) -> list[Edit]:
    """Two sizes that should agree: resize a tensor's dimension of one to the other."""
    pair, named = None, set()
    if m := re.search(r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\)",
                      text):
        pair = int(m[1]), int(m[2])
    elif m := re.search(r"expanded size of the tensor \((\d+)\) must match the existing size "
                        r"\((\d+)\)", text):
        pair = int(m[1]), int(m[2])
    elif m := re.search(r"shapes cannot be multiplied \((\d+)x(\d+) and (\d+)x(\d+)\)", text):
        pair = int(m[2]), int(m[3])
        named = {(int(m[3]), int(m[4]))}  # mat2 first: its rows follow mat1's columns
    elif m := re.search(r"size mismatch, got input \((\d+)\), mat \((\d+)x(\d+)\), "
                        r"vec \((\d+)\)", text):
        pair = int(m[3]), int(m[4])
        named = {(int(m[4]),)}
    elif m := re.search(r"Expected size (\d+) but got size (\d+)", text):
        pair = int(m[1]), int(m[2])
    if pair is None or pair[0] == pair[1]:
        return []
    # "at non-singleton dimension k" counts in the broadcast shape: a tensor's dimension that
    # lines up with k (right-aligned to the most dimensions any argument has) comes first.
    at = int(m[1]) if (m := re.search(r"non-singleton dimension (\d+)", text)) else None
    most = max((args[i].dim() for i in tensors), default=0)
    ranked = []
    for a, b in (pair, pair[::-1]):
        for i in tensors:
            shape = list(args[i].shape)
            dims = [d for d in reversed(range(len(shape))) if shape[d] == b]
            line = at - (most - len(shape)) if at is not None else None
            d = line if line in dims else (dims[0] if dims else None)
            if d is None:
                continue
            new = (*shape[:d], a, *shape[d + 1:])
            rank = (tuple(shape) not in named, d != line)
            ranked.append((rank, Edit(i, "shape", new, f"{said}: dimension {d} made {a}")))
    return [e for _, e in sorted(ranked, key=lambda r: r[0])]


def _number_as_tensor(text, args, tensors, numbers, first, said) -> list[Edit]:
    """A number where forward wants a tensor: the input's shape, its last dimension, 0-d."""
    if not re.search(r"'(?:float|int)' object has no attribute|must be Tensor, not (?:float|int)"
                     r"|expected Tensor as element|'(?:float|int)' object is not subscriptable",
                     text):
        return []
    out = []
    for i in (i for i in numbers if type(args[i]) is float or "int" in text):
        for shape in dict.fromkeys((first, first[-1:], ())):
            out.append(Edit(i, "shape", shape, f"{said}: a tensor, not a number"))
    return out[:3]


def _view(text, args, tensors, numbers, first, said) -> list[Edit]:
    """``view``/``reshape`` to a shape the tensor's size does not fit: make it fit."""
    m = re.search(r"shape '\[([-\d, ]*)\]' is invalid for input of size (\d+)", text)
    if not m:
        return []
    target = [int(s) for s in m[1].split(",") if s.strip()]
    size = int(m[2])
    known = math.prod(s for s in target if s != -1) or 1
    out = []
    for i in (i for i in tensors if args[i].numel() == size and args[i].dim() > 0):
        shape = list(args[i].shape)
        if -1 in target:
            lead = math.prod(shape[:-1])
            new = (*shape[:-1], known // math.gcd(lead, known))
        else:
            new = tuple(target)
        out.append(Edit(i, "shape", tuple(new), f"{said}: size made to fit"))
    return out[:2]


def _dims(text, args, tensors, numbers, first, said) -> list[Edit]:
    """A tensor with too few or too many dimensions: add or remove leading ones."""
    have = want = None
    if m := re.search(r"Dimension out of range \(expected to be in range of \[-(\d+), \d+\], "
                      r"but got (-?\d+)\)", text):
        have, got = int(m[1]), int(m[2])
        want = got + 1 if got >= 0 else -got
    elif m := re.search(r"not enough values to unpack \(expected (\d+), got (\d+)\)", text):
        have, want = int(m[2]), int(m[1])
    elif m := re.search(r"too many values to unpack \(expected (\d+)(?:, got (\d+))?\)", text):
        have, want = (int(m[2]) if m[2] else None), int(m[1])
    elif m := re.search(r"too many indices for tensor of dimension (\d+)", text):
        have = int(m[1])
        want = have + 1
    elif m := re.search(r"input.dim\(\) = (\d+) is not equal to len\(dims\) = (\d+)", text):
        have, want = int(m[1]), int(m[2])
    elif re.search(r"[Ee]xpected (?:[^,]*?\b)?\dD(?: \(batched\))? input"
                   r"|\dD(?: \(batch mode\))? tensor expected", text):
        want = max(int(d) for d in re.findall(r"(\d)D", text.split("got")[0]))
        have = int(m[1]) if (m := re.search(r"got (\d)D", text)) else None
    elif m := re.search(r"[Ee]xpected (\d)-?D\b|[Ee]xpected (\d+)-dimensional", text):
        want = int(m[1] or m[2])
    if want is None or want > 6:
        return []
    out = []
    for i in tensors:
        shape = tuple(args[i].shape)
        if (have is not None and len(shape) != have) or len(shape) == want:
            continue
        new = (2,) * (want - len(shape)) + shape if want > len(shape) else shape[-want:]
        out.append(Edit(i, "shape", new, f"{said}: {want}-D"))
        if "indices" in text and want > len(shape):
            out.append(Edit(i, "shape", shape + (2,), f"{said}: {want}-D"))
    return out[:3]


def _as_integer(text, args, tensors, numbers, first, said) -> list[Edit]:
    """A tensor or float where forward wants an integer (a slice bound, ``range(n)``, a size)
    or an index tensor."""
    out = []
    if re.search(r"tensors used as indices must be long|expected scalar type Long", text):
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
    if re.search(r"must be bool, not (?:float|int)", text):
        out += [Edit(i, "number", flag, f"{said}: a bool") for i in numbers
                if type(args[i]) is float for flag in (False, True)][:2]
    return out


def _as_scalar(text, args, tensors, numbers, first, said) -> list[Edit]:
    """A tensor with several values where forward wants one: 0-d, then a Python float."""
    if not re.search(r"only one element tensors can be converted to Python scalars"
                     r"|a Tensor with \d+ elements cannot be converted to Scalar"
                     r"|Boolean value of Tensor with more than one value is ambiguous", text):
        return []
    out = []
    for i in (i for i in tensors if args[i].numel() > 1):
        out.append(Edit(i, "shape", (), f"{said}: one value"))
    return out[:2] + [Edit(i, "number", 0.5, f"{said}: one value") for i in tensors
                      if args[i].numel() > 1][:1]


_RULES = (_sizes, _number_as_tensor, _view, _dims, _as_integer, _as_scalar)
