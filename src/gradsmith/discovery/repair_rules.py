"""What a forward's error asks of its arguments: the changes :mod:`.repair` tries (private).

Each rule reads one kind of message ("The size of tensor a (8) must match the size of tensor b
(3)", "'float' object has no attribute 'shape'", "shape '[-1, 16]' is invalid for input of size
24", "not enough values to unpack (expected 4, got 2)", "Expected 4D input", "too many indices",
"only integer tensors ... can be converted to an index", a failed ``assert x.shape == (B, M, 1)``)
and proposes a few :class:`Edit` each, the arguments the traceback's frames hold first.
"""

from __future__ import annotations

import linecache
import math
import re

from gradsmith.discovery.repair_asserts import asserted
from gradsmith.discovery.repair_kinds import KIND_RULES, NOTHING, Edit, cached, identical
from gradsmith.discovery.repair_lists import list_edits
from gradsmith.discovery.repair_named import named

__all__ = ["Edit", "edits_for", "message"]


def edits_for(exc: BaseException, args: list) -> list[Edit]:
    """The changes ``exc``'s message asks for, the arguments the traceback holds first.

    Example:
        >>> import torch
        >>> exc = RuntimeError("shape '[-1, 16]' is invalid for input of size 24")
        >>> [(e.index, e.value) for e in edits_for(exc, [torch.zeros(3, 8)])]
        [(0, (3, 16))]
    """
    import torch

    text = message(exc)
    order = _implicated(exc, args, text)
    tensors = [i for i in order if isinstance(args[i], torch.Tensor)
               and args[i].is_floating_point()]
    numbers = [i for i in order if type(args[i]) in (float, int)]
    first = next((tuple(args[i].shape) for i in tensors if args[i].dim() > 0), (3, 4))
    said = f"forward raised {type(exc).__name__}: {_short(text)}"
    out: list[Edit] = []
    line, local = _failing_line(exc)
    for rule in _RULES:
        out += rule(text, args, tensors, numbers, first, said, line, local)
    return [Edit(i, "shape", shape, why) for i, shape, why in asserted(exc, args)] + named(
        exc, args, said) + list_edits(exc, args, said) + out


def message(exc: BaseException) -> str:
    """The first line of ``exc``'s message; a TorchScript function's error says what failed on
    its last line ("RuntimeError: Dimension out of range ..."), after the script's traceback."""
    text = str(exc)
    if text.startswith("The following operation failed in the TorchScript interpreter"):
        last = [line for line in text.splitlines() if line.strip()][-1]
        return re.sub(r"^\w+(?:Error|Exception): ", "", last)
    return text.splitlines()[0] if text else type(exc).__name__


def _short(text: str) -> str:
    return text if len(text) <= 90 else text[:87] + "..."


def _implicated(exc: BaseException, args: list, text: str) -> list[int]:
    """Indices of ``args``: first those a traceback frame's failing line uses where the message
    points (``radius.item()`` for "cannot be converted to Scalar", ``w.shape`` for "'float'
    object has no attribute 'shape'"), then the others the frames hold (innermost first), then
    the rest."""
    entries = []
    tb = exc.__traceback__
    while tb is not None:
        entries.append((tb.tb_frame, tb.tb_lineno))
        tb = tb.tb_next
    patterns = [p for key, found in _FOCUS if re.search(key, text) for p in found]
    if m := re.search(r"object has no attribute '(\w+)'", text):
        patterns.append(rf"\b(\w+)\.{m[1]}\b")
    focused: list[int] = []
    lined: list[int] = []  # used on a failing line, in the order written
    held: list[int] = []
    for frame, lineno in reversed(entries[1:]):  # not the probe's own frame
        local = frame.f_locals
        line = linecache.getline(frame.f_code.co_filename, lineno)
        for name in (n for p in patterns for n in re.findall(p, line)):
            focused += identical(args, local.get(name, NOTHING))
        for name in re.findall(r"\b[A-Za-z_]\w*\b", line):
            lined += identical(args, local.get(name, NOTHING))
        values = list(local.values())
        held += [i for i, a in enumerate(args) if not cached(a) and any(v is a for v in values)]
    order = [*focused, *lined, *held, *range(len(args))]
    return list(dict.fromkeys(order))


# Where on the failing line the argument a message is about stands.
_FOCUS = (
    (r"converted to (?:Python scalars|Scalar)|Boolean value of Tensor",
     (r"\b(\w+)\.(?:item|tolist)\(\)", r"\b(?:float|int|bool|round)\((\w+)\)",
      r"\[(\w+)\]\)", r"\bif (?:not )?(\w+)\s*:", r"\b(\w+) (?:and|or)\b",
      r"\b(\w+)\s*(?:[!=]=|[<>]=?)\s*[-\w.]+\s*(?::|\band\b|\bor\b|\)|$)")),
    (r"must be Tensor, not|is not subscriptable|object is not iterable",
     (r"\((\w+)\)", r"\b(\w+)\[", r"\bin (\w+)\b")),
    (r"argument after \*\* must be a mapping", (r"\*\*(\w+)",)),
    (r"expected condition to be a boolean tensor|only supports boolean masks",
     (r"\bwhere\(\s*(\w+)", r"masked_\w+\(\s*(\w+)")),
    (r"can be converted to an index|used as indices|interpreted as an integer"
     r"|slice indices", (r"\[[^\]]*?:\s*(\w+)\s*\]", r"\[(\w+)\]", r"range\((\w+)\)")),
)


def _failing_line(exc: BaseException) -> tuple[str, dict]:
    """The source line the innermost traceback frame failed on ("" when unknown), and that
    frame's locals."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return "", {}
    return linecache.getline(tb.tb_frame.f_code.co_filename, tb.tb_lineno), tb.tb_frame.f_locals


_SHAPE = re.compile(r"\.shape\b|\.size\(\s*\)")


def _sizes(text, args, tensors, numbers, first, said, line, local) -> list[Edit]:
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
    if m := re.search(r"Target sizes: \[([-\d, ]+)\]\.\s+Tensor sizes: \[([\d, ]*)\]", text):
        target = tuple(int(d) for d in m[1].split(","))
        given = tuple(int(d) for d in m[2].split(",") if d.strip())
        ranked += [((0,), Edit(i, "shape", target, f"{said}: the target size"))
                   for i in tensors if tuple(args[i].shape) == given and min(target) > 0]
    for i in tensors:  # the operand the message shows (as it is, or transposed: ``w.T``)
        shape = tuple(args[i].shape)
        for d in [0] * (shape in named) + [len(shape) - 1] * (shape[::-1] in named):
            new = (*shape[:d], pair[0], *shape[d + 1:])
            ranked.append(((0,), Edit(i, "shape", new, f"{said}: dimension {d} made {pair[0]}")))
    for a, b in (pair, pair[::-1]):
        for i in tensors:
            shape = list(args[i].shape)
            dims = [d for d in reversed(range(len(shape))) if shape[d] == b]
            lined_up = at - (most - len(shape)) if at is not None else None
            d = lined_up if lined_up in dims else (dims[0] if dims else None)
            if d is None and args[i].numel() == b and args[i].dim() > 1:  # flattened inside
                ranked.append(((3,), Edit(i, "shape", (a,), f"{said}: {a} values")))
            if d is None:
                continue
            new = (*shape[:d], a, *shape[d + 1:])
            ranked.append(((1 + (d != lined_up),),
                           Edit(i, "shape", new, f"{said}: dimension {d} made {a}")))
    return list(dict.fromkeys(e for _, e in sorted(ranked, key=lambda r: r[0])))


def _view(text, args, tensors, numbers, first, said, line, local) -> list[Edit]:
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


def _dims(text, args, tensors, numbers, first, said, line, local) -> list[Edit]:
    """A tensor with too few or too many dimensions: add or remove leading ones."""
    have = want = None
    if m := re.search(r"Dimension out of range \(expected to be in range of \[-(\d+), \d+\], "
                      r"but got (-?\d+)\)", text):
        have, got = int(m[1]), int(m[2])
        want = got + 1 if got >= 0 else -got
    elif (m := re.search(r"not enough values to unpack \(expected (\d+), got (\d+)\)", text)) \
            and _SHAPE.search(line):  # `b, c, h, w = x.shape`, not a function's results
        have, want = int(m[2]), int(m[1])
    elif (m := re.search(r"too many values to unpack \(expected (\d+)(?:, got (\d+))?\)",
                         text)) and _SHAPE.search(line):
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


def _into(text, args, tensors, numbers, first, said, line, local) -> list[Edit]:
    """An in-place write into an argument (``buffer.copy_(clip_val)``, ``out.add_(y)``) whose
    shape cannot hold the result: the argument written into, in the result's shape (a
    running statistic or a clip value buffer the Function updates, usually one element)."""
    m = re.search(r"output with shape \[([\d, ]*)\] doesn't match the broadcast shape "
                  r"\[([\d, ]*)\]", text)
    if not m:
        return []
    have = tuple(int(n) for n in m[1].split(",") if n.strip())
    want = tuple(int(n) for n in m[2].split(",") if n.strip())
    written = [i for name in re.findall(r"\b(\w+)\.\w+_\(", line)
               for i in identical(args, local.get(name, NOTHING))]
    return [Edit(i, "shape", want, f"{said}: the shape written into it") for i in dict.fromkeys(
        written + tensors) if i in tensors and tuple(args[i].shape) == have][:1]


_RULES = (_sizes, _view, _dims, _into, *KIND_RULES)
