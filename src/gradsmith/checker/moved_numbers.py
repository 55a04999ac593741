"""Python-number arguments that a printed surrogate term names: read from them, not lucky.

A triangle surrogate ``ZIF`` (corpus 10 dev, spent) takes its width ``gama`` as a Python
number and returns ``grad * (1 / gama) ** 2 * (gama - |x|).clamp(min=0)``: a triangle of
height ``1 / gama`` and area 1 for every ``gama``. Fitted at the synthesised ``gama = 0.5``,
its amplitude ``c * w = 1`` was printed as ``2 * gama`` (the argument forms come first and
``2 * 0.5`` is 1): the line passed at the printed example and is wrong at every other width,
the project's default 1.0 among them. A term that names a Python-number argument is kept only
where it also matches backward with that number moved (:data:`FACTORS`); otherwise the next
candidate (the plain ``1``) gets its turn. The factor of a scaled backward is read the same
way (a reversal that ignores ``alpha`` gets ``-grad``, not ``-alpha * grad`` at ``alpha = 1``).

A 0-dim floating tensor argument is a number to the writers too (BiBERT's ``num_bits``,
given as ``torch.tensor(2.0)``: a plain window was printed ``(num_bits / 2) *
x.clamp(...)``, right only at 2 bits; corpus 5b dev, spent), so a term naming one is moved
the same way (:func:`holds` moves it in the inputs backward and the declaration receive).

A moved number on which forward or backward raises (outside forward's domain: a mode
selector, a count for ``range``) says nothing about the term; it is skipped.
:func:`gradsmith.checker.ignored_args.holds_moved` does the same for 0-dim tensor arguments
forward ignores.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import torch

from gradsmith.checker.ignored_args import backward_at
from gradsmith.checker.session import Session

#: What a float argument is multiplied by; an integer one becomes ``2 * n`` and ``n + 1``.
FACTORS = (1.5, 0.75)


def named(session: Session, names: list[str], term: str) -> list[tuple[int, list]]:
    """``(leaf, moved values)`` of each top-level Python-number argument ``term`` names, and
    of each 0-dim floating tensor held constant (not differentiated)."""
    args = session.subject.args
    diff = {d.leaf for d in args.inputs}
    out = []
    for i, value in enumerate(args.values):
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        scalar = (isinstance(value, torch.Tensor) and value.dim() == 0
                  and value.is_floating_point() and float(value.detach()) != 0)
        if not (number or scalar) or i >= len(names) or not _mentions(names[i], term):
            continue
        leaf = next((j for j in range(len(args.labels))
                     if args.top_index[j] == i and args.leaf(j) is value), None)
        if leaf is None or leaf in diff:
            continue  # a differentiated one is moved in the inputs (named_tensors)
        if scalar:
            out.append((leaf, [value.detach() * f for f in FACTORS]))
            continue
        moved = ([value * f for f in FACTORS] if isinstance(value, float)
                 else [2 * value, value + 1])
        out.append((leaf, [m for m in moved if m != value]))
    return out


def _mentions(name: str, term: str) -> bool:
    return bool(re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", term))


def named_tensors(session: Session, names: list[str], term: str) -> list[int]:
    """The 0-dim floating tensor inputs (positions in the subject's differentiated inputs)
    that ``term`` names by their forward parameter."""
    args = session.subject.args
    out = []
    for t, x in enumerate(session.subject.base()):
        top = args.position(t)
        if (top is not None and top < len(names) and x.dim() == 0 and x.is_floating_point()
                and float(x) != 0 and _mentions(names[top], term)):
            out.append(t)
    return out


def holds(session: Session, names: list[str], term: str,
          agrees: Callable[[list[torch.Tensor], list[torch.Tensor]], bool],
          split: list[torch.Tensor]) -> bool:
    """Whether ``agrees(xs, backward_grads)`` holds with each Python-number argument that
    ``term`` names moved, one at a time, to each of its moved values; True when the term
    names none. ``backward_grads`` are backward's gradients at the check's inputs ``xs`` for
    the incoming gradients ``split``, with that argument moved; ``agrees`` runs the
    declaration with the same argument moved."""
    args = session.subject.args
    for leaf, values in named(session, names, term):
        for value in values:
            with args.swapped({leaf: value}):
                xs = [b.clone() for b in session.subject.base()]
                try:
                    want = backward_at(session, xs, split)
                except Exception:  # noqa: BLE001 - outside forward's domain: says nothing
                    continue
                if not all(bool(torch.isfinite(w).all()) for w in want):
                    continue  # a gradient that is not finite there: nothing to compare
                if not agrees([x.detach() for x in xs], want):
                    return False
    for t in named_tensors(session, names, term):
        for factor in FACTORS:
            xs = [b.clone() for b in session.subject.base()]
            xs[t] = xs[t] * factor
            try:
                want = backward_at(session, xs, split)
            except Exception:  # noqa: BLE001 - outside forward's domain: says nothing
                continue
            if not all(bool(torch.isfinite(w).all()) for w in want):
                continue
            if not agrees([x.detach() for x in xs], want):
                return False
    return True
