"""Integer tensors the code indexes, counts or measures with (private).

A tensor parameter that forward (or a helper it hands the parameter to) uses as integers was
synthesised as float64 when no indexing call (``gather``, ``embedding``) named it, and the
Function then failed for the inputs' sake: ``indices == n_idx`` matched nothing, so an output
built with ``new_empty`` stayed uninitialised; ``repeat_interleave(bias, token_counts)`` is
"not implemented for 'Double'"; ``t <= lengths`` ran, but backward's ``beta[b, lengths[b]]``
raised "only integers ... are valid indices (got float)" and the row was a FAIL blamed on the
Function. :func:`read_integer_kinds` reads, never runs, what the uses mean:

- ``p == v`` / ``p != v`` with ``v`` the variable of ``for v in range(n)``: ``p`` holds class
  indices below ``n`` (``n, out, in = W.shape``: below ``W``'s number of rows);
- ``t < p`` / ``t <= p`` / ``p > t`` with ``t`` a loop variable (or a ``torch.arange``), or
  ``p == n + 1`` (a position, not a class): ``p`` holds lengths, one per sequence of the
  batch, at least 1 and at most the time axis;
- ``repeat_interleave(x, p, ..., output_size=s)``: ``p`` counts the repeats of each of
  ``x``'s rows (positive ints), and ``s`` is their sum.
- ``x[p[i] : p[i + 1]]``: ``p`` holds the offsets of packed sequences in ``x``'s rows
  (``cu_seqlens``: int64, non-decreasing from 0 to ``x``'s number of rows). Random floats made
  ``bsz = p.shape[0] - 1`` zero, the loop over sequences never ran, and an output built with
  ``torch.empty_like`` was never filled: an INCOMPLETE blamed on the Function.

:func:`integer_value` then builds such an index slot (see :mod:`~gradsmith.discovery.build`).
"""

from __future__ import annotations

import ast
from typing import Any

from gradsmith.discovery.callees import followed
from gradsmith.discovery.label_sequences import read_label_sequences, sequences_value
from gradsmith.discovery.source import parse

_ORDER = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)


def read_integer_kinds(target: Any, owner: Any, hints: dict, frozen: set[str]) -> None:
    """Set the index kind (and ``length`` / ``repeats`` / ``total_of``) on the hints of
    parameters used as integers. Only parameters backward returns no gradient for
    (``frozen``) are read: a differentiated tensor is a float whatever it is compared with
    (``(x > k).sum()`` over ``range(K)`` is a staircase of a float ``x``).

    Example:
        >>> from gradsmith.discovery.hints import Hint
        >>> def forward(ctx, X, W, indices):
        ...     n, out_features, in_features = W.shape
        ...     for n_idx in range(n):
        ...         rows = torch.where(indices == n_idx)
        >>> hints = {"X": Hint(), "W": Hint(), "indices": Hint()}
        >>> read_integer_kinds(forward, None, hints, {"indices"})
        >>> hints["indices"].kind, hints["indices"].rows_of
        ('index', 'W')
    """
    tree = parse(target) if frozen & set(hints) else None
    if tree is None:
        return
    names = {n: n for n in hints}
    _read(tree, names, hints, frozen)
    read_label_sequences(target, tree, owner, hints, frozen)  # len(targets[b]), target[i]
    klass = owner if isinstance(owner, type) else None
    for helper, passed in followed(target, tree, names, klass, package=True):
        _read(helper, passed, hints, frozen)


def _read(tree: ast.AST, names: dict[str, str], hints: dict, frozen: set[str]) -> None:
    """``names``: the tree's names of our parameters; kinds are set on ``frozen`` ones."""
    rows = _row_counts(tree, names)
    loops = _loop_bounds(tree)
    ints = {mine: ours for mine, ours in names.items() if ours in frozen}
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            _compare(node, ints, hints, loops, rows)
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(
                node.func, "id", "")) == "repeat_interleave":
            _repeats(node, ints, names, hints)
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
            _offsets(node, ints, names, hints)


def _offsets(node: ast.Subscript, ints: dict[str, str], names: dict[str, str],
             hints: dict) -> None:
    """``x[p[i] : p[i + 1]]``: ``p`` the start offsets of packed sequences in ``x``'s rows."""
    lower, upper = node.slice.lower, node.slice.upper
    if not (isinstance(lower, ast.Subscript) and isinstance(upper, ast.Subscript)
            and isinstance(upper.slice, ast.BinOp) and isinstance(upper.slice.op, ast.Add)
            and ast.dump(upper.slice.left) == ast.dump(lower.slice)
            and ast.dump(upper.slice.right) == ast.dump(ast.Constant(1))):
        return
    param = ints.get(lower.value.id) if isinstance(lower.value, ast.Name) else None
    if param is None or _param(upper.value, ints) != param \
            or hints[param].kind not in (None, "tensor", "index"):
        return
    hints[param].kind, hints[param].offsets = "index", True
    hints[param].rows_of = _param(node.value, names) or hints[param].rows_of


def _param(node: ast.AST, names: dict[str, str]) -> str | None:
    """Our parameter ``node`` reads: ``p``, ``p[b]``, ``p.long()``, ``p.unsqueeze(1)``."""
    while isinstance(node, (ast.Subscript, ast.Call, ast.Attribute)):
        node = node.value if not isinstance(node, ast.Call) else node.func
    return names.get(node.id) if isinstance(node, ast.Name) else None


def _row_counts(tree: ast.AST, names: dict[str, str]) -> dict[str, str]:
    """Local name -> our parameter whose first size it holds (``n, a, b = W.shape``, ``n =
    W.shape[0]``, ``n = W.size(0)``)."""
    found = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        target, value = node.targets[0], node.value
        first = target.elts[0] if isinstance(target, ast.Tuple) and target.elts else target
        if isinstance(target, ast.Tuple) and isinstance(value, ast.Attribute) and \
                value.attr == "shape" or isinstance(value, ast.Call) and \
                getattr(value.func, "attr", "") == "size" and not value.args:
            source = value.value if isinstance(value, ast.Attribute) else value.func.value
        elif isinstance(value, ast.Subscript) and isinstance(value.value, ast.Attribute) and \
                value.value.attr == "shape" and _is_zero(value.slice):
            source = value.value.value
        elif isinstance(value, ast.Call) and getattr(value.func, "attr", "") == "size" and \
                value.args and _is_zero(value.args[0]):
            source = value.func.value
        else:
            continue
        if isinstance(first, ast.Name) and (param := _param(source, names)) is not None:
            found[first.id] = param
    return found


def _is_zero(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value == 0


def _loop_bounds(tree: ast.AST) -> dict[str, ast.expr | None]:
    """Loop variables (``for v in range(n)``) and aranges (``t = torch.arange(T)``), with the
    bound of ``range`` (None when not one argument)."""
    found: dict[str, ast.expr | None] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.For) and isinstance(node.target, ast.Name) and isinstance(
                node.iter, ast.Call) and getattr(node.iter.func, "id", "") == "range":
            found[node.target.id] = node.iter.args[0] if len(node.iter.args) == 1 else None
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and getattr(
                node.value.func, "attr", "") == "arange":
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found[target.id] = None
    return found


def _compare(node: ast.Compare, names: dict[str, str], hints: dict,
             loops: dict[str, ast.expr | None], rows: dict[str, str]) -> None:
    sides = [node.left, *node.comparators]
    for left, op, right in zip(sides, node.ops, sides[1:]):
        for mine, other in ((left, right), (right, left)):
            param = _param(mine, names)
            shifted = isinstance(other, ast.BinOp) and isinstance(other.op, (
                ast.Add, ast.Sub)) and isinstance(other.right, ast.Constant)
            counter = other.left if shifted else other  # lengths == n + 1: a position
            if param is None or not isinstance(counter, ast.Name) or counter.id not in loops:
                continue
            hint = hints[param]
            if hint.kind not in (None, "tensor", "index"):
                continue  # a Python int or flag compared with a counter: not a tensor
            if shifted:
                hint.kind, hint.length = "index", True
            elif isinstance(op, (ast.Eq, ast.NotEq)) and not hint.length:
                hint.kind = "index"
                bound = loops[counter.id]
                if isinstance(bound, ast.Name) and bound.id in rows:
                    hint.rows_of = rows[bound.id]
            elif isinstance(op, _ORDER):
                hint.kind, hint.length = "index", True


def _repeats(node: ast.Call, names: dict[str, str], every: dict[str, str], hints: dict) -> None:
    """``torch.repeat_interleave(x, p, dim=0, output_size=s)`` or ``x.repeat_interleave(p)``."""
    method = isinstance(node.func, ast.Attribute) and not (
        isinstance(node.func.value, ast.Name) and node.func.value.id == "torch")
    args = ([node.func.value] if method else []) + list(node.args)
    counts = next((k.value for k in node.keywords if k.arg == "repeats"),
                  args[1] if len(args) > 1 else None)
    param = _param(counts, names) if counts is not None else None
    if param is None or hints[param].kind not in (None, "tensor", "index"):
        return
    source = _param(args[0], every) if args else None
    hints[param].kind, hints[param].repeats = "index", True
    hints[param].rows_of = source or hints[param].rows_of
    size = next((k.value for k in node.keywords if k.arg == "output_size"), None)
    if (total := _param(size, names) if size is not None else None) is not None:
        hints[total].kind, hints[total].total_of = "int", param


def integer_value(slot: Any, first_shape: tuple, rows: int | None, generator: Any,
                  strided: bool = False):
    """(tensor, description) for an index slot that holds lengths, repeat counts, codes or
    label sequences, else None (a class index: the usual build). ``strided``: codes in a
    non-contiguous view (every other element of a buffer)."""
    import torch

    hint = slot.hint
    if (made := sequences_value(slot, first_shape, generator)) is not None:
        return made  # targets[b]: one label list per row
    if hint is not None and hint.codes:
        value, text = _codes(slot.name, hint.codes, first_shape, generator)
        if not strided or value.numel() < 2:
            return value, text
        value = torch.stack([value, value.flatten().roll(1).view_as(value)], -1)[..., 0]
        return value, text + f", non-contiguous (strides {value.stride()})"
    if hint is None or not (hint.length or hint.repeats or hint.offsets):
        return None
    if hint.offsets:  # two sequences, the second of 2 or more rows (were every sequence one
        count = rows or (first_shape[0] if first_shape else 3)  # row, attention's softmax
        value = torch.tensor([0, count // 2, count] if count >= 3 else [0, count])  # is 1)
        return value, (f"{slot.name}: int64 offsets {value.tolist()} (packed sequences: "
                       "forward slices rows p[i]:p[i + 1])")
    if hint.repeats:
        count = rows or (first_shape[0] if first_shape else 3)
        value = torch.randint(1, 4, (count,), generator=generator)
        return value, f"{slot.name}: int64 ({count},) repeat counts in [1, 3] (one per row)"
    batch = first_shape[0] if first_shape else 2
    longest = max(1, first_shape[1] - 1) if len(first_shape) > 1 else 2
    value = torch.randint(1, longest + 1, (batch,), generator=generator)
    value[0] = longest  # one full-length sequence, the others at most as long
    return value, (f"{slot.name}: int64 ({batch},) lengths in [1, {longest}] (one per "
                   "sequence; forward compares positions with them)")


def _codes(name: str, codes: list[int], first_shape: tuple, generator: Any):
    """One code per row of the first tensor, every code once before any repeats (as many
    branches as rows allow), in a random order: a kernel reads ``at == 5`` per row."""
    import torch

    shape = tuple(first_shape[:-1]) if len(first_shape) > 1 else (3,)
    if len(codes) == 1:  # `if mask == 0: return`: a flag tested against one value, the rest
        codes = [codes[0], codes[0] + 1]  # the other branch (every row masked computes nothing)
    count = 1
    for size in shape:
        count *= size
    order = torch.randperm(len(codes), generator=generator).tolist()
    values = [codes[order[i % len(codes)]] for i in range(count)]
    value = torch.tensor(values, dtype=torch.int64).reshape(shape)
    return value, (f"{name}: int64 {shape} codes from {sorted(codes)} (a kernel compares its "
                   "loaded values with these literals)")


def total(slot: Any, built: dict[str, Any]) -> int | None:
    """The sum of the counts ``slot`` is the total of (``output_size``), once built."""
    counts = built.get(slot.hint.total_of) if slot.hint is not None else None
    return int(counts.sum()) if counts is not None else None
