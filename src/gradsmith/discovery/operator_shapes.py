"""What a linear-operator stand-in's shape attributes are, and other guesses for them (private).

Forward applying the operator to a whole tensor argument (``operator(input, out=output)``,
not ``operator(input[i])``) says the operator's domain is that tensor's whole shape:
:func:`applied_whole` reads it, and the stand-in's shapes follow (no extra dimensions).

A stand-in's ``domain_shape`` / ``range_shape`` are a guess: the first tensor's shape after
its batch and channel dimensions. A Function that applies the operator to the whole input
(``num_extra_dims=0``: no extra dimensions) then allocates its gradient from the stand-in's
shape and hands autograd a gradient of the wrong shape, an error the invented attribute made,
not the Function (corpus 12a held-out: an operator Function FAILed grad-shape-mismatch with
its input (2, 3, 8) and the stand-in's domain (8,)). :func:`reshaped` lists the failing input
set with each such stand-in reading the first tensor's shape after another number of leading
dimensions, where forward and backward run: the check re-runs there
(:mod:`gradsmith.checkrun.guesses`), and a Function that passes on one is not shown wrong.
"""

from __future__ import annotations

import ast
from typing import Any

# Candidate sets at most: one per other count of leading dimensions, fewest first.
_CANDIDATES = 2


def applied_whole(tree: ast.AST | None, names: list[str]) -> set[str]:
    """Parameters forward calls (itself or a method of it) with another parameter, unindexed,
    as the first argument: ``operator(input, out=output)`` maps the whole ``input``."""
    found: set[str] = set()
    for node in ast.walk(tree) if tree is not None else ():
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func.value if isinstance(node.func, ast.Attribute) else node.func
        first = node.args[0]
        if isinstance(func, ast.Name) and func.id in names and isinstance(first, ast.Name) \
                and first.id in names and first.id != func.id:
            found.add(func.id)
    return found


def reshaped(call: Any, failed: tuple, names: list[str]) -> list:
    """Input sets equal to ``failed`` but for each stand-in with shape attributes, which reads
    the first tensor's shape after another number of leading dimensions; each where forward
    and backward run, as :class:`~gradsmith.discovery.second_guess.Guess`."""
    from gradsmith.discovery.probe import backward_error, probe
    from gradsmith.discovery.second_guess import Guess

    shaped = [i for i, a in enumerate(failed) if getattr(a, "_spec", None) is not None
              and type(a).__name__ == "LinearStandIn" and a._spec.shapes]
    if not shaped or len(names) != len(failed):
        return []
    found = []
    first = failed[shaped[0]]._first
    for lead in range(len(first)):
        args = list(_fresh(failed))
        changed = {}
        for i in shaped:
            was = failed[i]._gradsmith_shape()
            args[i] = failed[i]._gradsmith_with_lead(lead)
            now = args[i]._gradsmith_shape()
            if now != was and now:
                shapes = ", ".join(failed[i]._spec.shapes)
                changed[names[i]] = (f"{shapes} = {was}", f"{shapes} = {now}")
        if not changed:
            continue
        try:
            runs = probe(call, list(args)) is True and backward_error(call, tuple(args)) is None
        except Exception:  # noqa: BLE001 - does not run there: not a candidate
            runs = False
        if runs:
            found.append(Guess(tuple(_fresh(args)), changed))
        if len(found) >= _CANDIDATES:
            break
    return found


def _fresh(args: Any) -> tuple:
    """``args`` with each tensor a fresh copy (forward may write into its inputs)."""
    import torch

    return tuple(a.detach().clone().requires_grad_(a.requires_grad)
                 if isinstance(a, torch.Tensor) else a for a in args)
