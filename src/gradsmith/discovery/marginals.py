"""Tensors without a gradient whose shapes the code implies are marginals of another (private).

``forward(ctx, C, mu, nu, eps, n_iter)`` of a Sinkhorn solver divides by ``(G * v).sum(-1,
keepdim=True)`` with ``mu`` and by ``(G * u).sum(-2, keepdim=True)`` with ``nu``: ``mu`` is
``(1, n, 1)`` and ``nu`` is ``(1, 1, k)`` for a cost ``C`` of ``(b, n, k)``, the marginals of
the transport plan, one keeping dimension 1, the other dimension 2. Synthesis gave them ``C``'s
full shape; forward broadcast and ran, and backward, which views ``mu`` as ``[1, n]``, raised a
shape error: corpus 11a's ``TopKFunc1`` reported a ``backward-error`` on a correct Function.

A tensor backward returns ``None`` for (its gradient is never compared) carries no shape the
check can learn from the gradient, so when backward raised a shape error on the layouts tried,
:func:`marginal_inputs` tries those tensors in the layouts that a reduction of the main tensor
gives: one dimension kept (``(1, n, 1)``), then one dimension reduced (``(b, n, 1)``), each as a
positive vector summing to 1 (a marginal is a distribution: two marginals of one plan must have
the same mass, or the solver never converges). The first combination on which forward *and*
backward run wins. When none does, :func:`marginal_doubt` says the error may be the guessed
shapes', not the Function's: a skip with the reason, never a ``backward-error`` on shapes the
code never stated. Read and run only on that failure path.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import replace
from typing import Any

from gradsmith.discovery.doubt import INDEX_ERROR

# Combinations of candidate shapes tried at most (each costs a forward and a backward).
_MAX_TRIES = 48

# Errors about sizes and ranks (the same family discovery.doubt treats as shape errors).
_SHAPE_ERROR = re.compile(r"size of tensor|shape '\[|invalid for input of size|must match|"
                          r"cannot be multiplied|broadcast|expected shape|dimension")


def frozen_tensors(args: tuple, slots: list) -> list[int]:
    """Positions of synthesised floating tensors backward returns no gradient for."""
    import torch

    return [i for i, (a, s) in enumerate(zip(args, slots)) if s.kind == "tensor" and
            s.frozen and isinstance(a, torch.Tensor) and a.is_floating_point()]


def marginal_inputs(found: Any, slots: list, check) -> Any | None:
    """``found`` (a :class:`~gradsmith.discovery.layout_search.Synthesized` whose backward
    raised a shape error) with its frozen tensors in the first marginal layout on which
    ``check(args)`` (forward and backward run) holds, or None."""
    import torch

    if not _SHAPE_ERROR.search(str(found.doubt)) or INDEX_ERROR.search(str(found.doubt)):
        return None  # an index out of range is discovery.doubt's (values cast to indices)
    args = list(found.args)
    frozen = frozen_tensors(found.args, slots)
    main = [a for i, a in enumerate(args) if i not in frozen and isinstance(a, torch.Tensor)
            and a.is_floating_point()]
    if not frozen or not main:
        return None
    shape = max(main, key=lambda a: a.dim()).shape
    if len(shape) < 2:
        return None
    generator = torch.Generator().manual_seed(found.seed)
    options = [_candidates(tuple(shape))] * len(frozen)
    for combo in itertools.islice(itertools.product(*options), _MAX_TRIES):
        trial = list(args)
        for i, dims in zip(frozen, combo):
            values = torch.rand(dims, dtype=args[i].dtype, generator=generator) + 0.5
            trial[i] = values / values.sum()
        if check(tuple(trial)):
            return replace(found, args=tuple(trial), variants=(), doubt="",
                           description=_described(found.description, slots, frozen, combo))
    return None


def _candidates(shape: tuple[int, ...]) -> list[tuple[int, ...]]:
    """One dimension kept (the others 1), then one dimension reduced to 1."""
    kept = [tuple(n if j == d else 1 for j, n in enumerate(shape)) for d in range(len(shape))]
    reduced = [tuple(1 if j == d else n for j, n in enumerate(shape)) for d in range(len(shape))]
    return list(dict.fromkeys(kept + reduced))


def _described(text: str, slots: list, frozen: list[int], combo: tuple) -> str:
    """The Inputs column with each frozen tensor's part replaced by its marginal layout."""
    names = [s.name for s in slots]
    alternatives = "|".join(map(re.escape, names))
    parts = re.split(rf", (?=(?:{alternatives})[:=])", text)
    for i, dims in zip(frozen, combo):
        mine = f"{names[i]}:"
        at = next((k for k, p in enumerate(parts) if p.startswith(mine)), None)
        new = (f"{names[i]}: float64 {dims} (a marginal: positive, summing to 1; backward "
               "returns None for it and rejected the other layouts)")
        parts = parts[:at] + [new] + parts[at + 1:] if at is not None else parts + [new]
    return ", ".join(parts)


def marginal_doubt(fn: Any, raised: str, slots: list, hints: dict, args: tuple) -> str:
    """Why a backward shape error on synthesised inputs is not shown to be the Function's:
    some tensors backward returns no gradient for had guessed shapes, and no marginal layout
    of them let backward run. Empty when the error is not about shapes or none was frozen."""
    from gradsmith.discovery.suggestion import no_inputs_reason

    frozen = frozen_tensors(args, slots)
    if not frozen or not _SHAPE_ERROR.search(str(raised)):
        return ""
    what = ", ".join(slots[i].name for i in frozen)
    return no_inputs_reason(
        fn, f"backward raised a shape error on every synthesised layout (first: {raised}), and "
        f"the shapes of {what} (backward returns no gradient for "
        f"{'it' if len(frozen) == 1 else 'them'}) are guesses the code never states, also tried "
        "as marginals of the main tensor: the error may be the inputs', not the Function's",
        slots, hints, lead="the synthesised inputs are not shown to fit")
