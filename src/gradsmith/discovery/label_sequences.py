"""Batches of integer label sequences: ``targets[b]`` measured with ``len`` and read label by
label (private).

A sequence loss (CTC, ASG, STC over a graph library) takes ``targets``, one label list per
utterance: forward hands ``targets[b]`` to a helper that takes ``len(target)`` and reads
``target[idx]`` one label at a time into the graph it builds. Synthesised as a float tensor
with the emissions' layout ((T, C) rows: more labels than frames, fractional labels the graph
library truncates), no alignment existed, the loss was inf everywhere and the row INCOMPLETE
(nan-output, not-exercised) on correct Functions. Read, never run, from forward and the
functions it hands the parameter's items to: a parameter backward returns no gradient for
whose items are measured (``len(p[b])``, ``len(t)`` for ``for t in p``, or a helper's
``len(target)``) and read one element at a time (``t[i]``) holds label sequences. It is built
as ``(B, L)`` int64 labels (:func:`sequences_value`): one short sequence per row of the first
tensor, ``L`` at most ``(T - 1) // 2`` of its ``T`` frames (room for a blank between repeated
labels), labels from 1 (0 is the usual blank).
"""

from __future__ import annotations

import ast
from typing import Any

from gradsmith.discovery.callees import followed


def read_label_sequences(target: Any, tree: ast.AST, owner: Any, hints: dict,
                         frozen: set[str]) -> None:
    """Mark (``kind="index"``, ``sequences``) the frozen parameters of ``target`` (forward,
    parsed as ``tree``) whose items are sequences of labels (see the module).

    Example:
        >>> import ast, inspect, textwrap
        >>> from gradsmith.discovery.hints import Hint
        >>> def graph(target):
        ...     return [target[i] for i in range(len(target))]
        >>> def forward(ctx, x, targets):
        ...     return [graph(targets[b]) for b in range(x.shape[0])]
        >>> hints = {"x": Hint(), "targets": Hint()}
        >>> tree = ast.parse(textwrap.dedent(inspect.getsource(forward)))
        >>> read_label_sequences(forward, tree, None, hints, {"targets"})
        >>> hints["targets"].kind, hints["targets"].sequences
        ('index', True)
    """
    mine = {n: n for n in frozen if n in hints and hints[n].kind in (None, "tensor", "index")}
    if not mine:
        return
    measured: set[str] = set()
    read: set[str] = set()
    _uses(tree, _items(tree, mine), set(mine), measured, read)
    klass = owner if isinstance(owner, type) else None
    for helper, passed in followed(target, tree, mine, klass, param_of=_item_of,
                                   package=True):
        _uses(helper, passed, set(), measured, read)
    for name in measured & read:
        hints[name].kind = "index"
        hints[name].sequences = True  # built by sequences_value


def _item_of(node: ast.AST, names: dict[str, str]) -> str | None:
    """The parameter whose item ``node`` is: ``p[b]``."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
        return names.get(node.value.id)
    return None


def _items(tree: ast.AST, names: dict[str, str]) -> dict[str, str]:
    """Local name -> parameter, for names holding an item: ``for t in p``, ``t = p[b]``."""
    found: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.For) and isinstance(node.target, ast.Name) and \
                isinstance(node.iter, ast.Name) and node.iter.id in names:
            found[node.target.id] = names[node.iter.id]
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name) and \
                (p := _item_of(node.value, names)) is not None:
            found[node.targets[0].id] = p
    return found


def _uses(tree: ast.AST, items: dict[str, str], params: set[str], measured: set[str],
          read: set[str]) -> None:
    """Record which parameters' items (``items``: local name -> parameter; ``p[b]`` for the
    ``params`` themselves) ``tree`` measures with ``len`` and reads element-wise."""
    def item(node: ast.AST) -> str | None:
        if isinstance(node, ast.Name):
            return items.get(node.id)
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and \
                node.value.id in params and node.value.id not in items:
            return node.value.id  # p[b] in forward itself
        return None

    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id == "len" and len(node.args) == 1 and \
                (p := item(node.args[0])) is not None:
            measured.add(p)
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and \
                (p := item(node.value)) is not None and not isinstance(node.slice, ast.Slice):
            read.add(p)


def sequences_value(slot: Any, first_shape: tuple, generator: Any):
    """(tensor, description) for a slot of label sequences, else None."""
    import torch

    if slot.hint is None or not getattr(slot.hint, "sequences", False):
        return None
    batch = first_shape[0] if first_shape else 2
    frames = first_shape[1] if len(first_shape) > 2 else 3
    length = max(1, (frames - 1) // 2)
    high = max(2, min(first_shape) if first_shape else 2)
    value = torch.randint(1, high, (batch, length), generator=generator)
    return value, (f"{slot.name}: int64 ({batch}, {length}) label sequences in [1, {high}) "
                   f"(one per row; the code takes len() of its items and reads them label by "
                   f"label)")
