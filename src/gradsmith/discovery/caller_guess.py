"""The project's own inputs as a candidate for a FAIL on synthesised inputs (private).

Synthesised inputs follow the code's shapes, not its contract: a Function written for
unit-norm columns (its project's wrapper normalises before ``apply``) gets Gaussian ones, and
its backward, right where the contract holds, "disagrees" with finite differences (corpus 12a
held-out: a Householder product FAILed gradient-mismatch). Such a FAIL is not shown to be the
Function's harm on inputs it is written for. :func:`project_inputs` records what the
project's callers (:mod:`~gradsmith.discovery.callers`) pass to ``apply`` when run on
synthesised inputs of their own, or else what its examples and tests pass
(:mod:`~gradsmith.discovery.project_examples`): a candidate the failing checks are re-run on
(:mod:`gradsmith.checkrun.guesses`). If the Function passes there the row is INCOMPLETE
(``unconfirmed-guess``, naming what differs), never PASS; a backward wrong on the project's
inputs too keeps its FAIL. Only failing rows pay for it, within a few seconds.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

_MAX_TRIES = 3
_BUDGET_S = 3.0


def project_inputs(fn: Any, seed: int, failed: tuple, names: list[str]) -> list:
    """One :class:`~gradsmith.discovery.second_guess.Guess`: the first input set a caller of
    ``fn`` passes to ``apply`` on which forward and backward run, with what differs from
    ``failed`` per argument; empty when there is none (or ``fn`` is no Function class)."""
    if not isinstance(fn, type) or len(names) != len(failed):
        return []
    from gradsmith.discovery.callers import callers_of
    from gradsmith.discovery.layout_search import Synthesized
    from gradsmith.discovery.probe import backward_error, probe
    from gradsmith.discovery.second_guess import Guess
    from gradsmith.discovery.synthesize import synthesize
    from gradsmith.discovery.through_callers import _callables, record

    start = time.perf_counter()
    try:
        callers = callers_of(fn)
    except Exception:  # noqa: BLE001 - unreadable source: no candidate
        return []
    tries = (built for caller in callers[:_MAX_TRIES] for built in _callables(caller))
    for call, text in itertools.islice(tries, _MAX_TRIES):
        if time.perf_counter() - start > _BUDGET_S:
            break
        try:
            found = synthesize(call, seed)
            args = record(fn, call, found.args) if isinstance(found, Synthesized) else None
            if args is None or len(args) != len(failed) or \
                    probe(fn.apply, list(args)) is not True or \
                    backward_error(fn.apply, args) is not None:
                continue
        except Exception:  # noqa: BLE001 - the caller's own failure: no candidate
            continue
        changed = {n: (_said(a), _said(b))
                   for n, a, b in zip(names, failed, args) if not _same(a, b)}
        if changed:
            return [Guess(tuple(args), changed, f"what `{text}` passes to apply")]
    return _from_examples(fn, seed, failed, names)


def _from_examples(fn: type, seed: int, failed: tuple, names: list[str]) -> list:
    """The candidate the project's examples and tests give (what the first that runs passes
    to ``apply``; :mod:`~gradsmith.discovery.project_examples`), when no caller gave one."""
    from gradsmith.discovery.layout_search import NoInputs, Synthesized
    from gradsmith.discovery.project_examples import through_examples
    from gradsmith.discovery.second_guess import Guess

    try:
        found = through_examples(fn, seed, NoInputs(""))
    except Exception:  # noqa: BLE001 - an example's own failure: no candidate
        return []
    if not isinstance(found, Synthesized) or len(found.args) != len(failed):
        return []
    changed = {n: (_said(a), _said(b)) for n, a, b in zip(names, failed, found.args)
               if not _same(a, b)}
    source = found.description.removeprefix("as ").removesuffix(" passes them")
    return [Guess(tuple(found.args), changed, f"what {source} passes to apply")] \
        if changed else []


def _same(a: Any, b: Any) -> bool:
    import torch

    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and a.dtype == b.dtype and bool(
            torch.equal(a.detach(), b.detach()))
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - objects without a plain equality
        return a is b


def _said(value: Any) -> str:
    """A tensor's dtype, shape and what its values look like (its range, the norms of its rows
    and columns: what a contract on values states), else its kind."""
    import torch

    from gradsmith.discovery.second_guess import _kind

    if not isinstance(value, torch.Tensor) or not value.is_floating_point() or \
            value.dim() < 1 or not value.numel():
        return _kind(value)
    v = value.detach()
    said = f"{_kind(value)} with values in [{float(v.min()):.3g}, {float(v.max()):.3g}]"
    for dim, what in ((-1, "row"), (-2, "column"))[:v.dim()]:
        norms = v.norm(dim=dim)
        said += f", {what} norms in [{float(norms.min()):.3g}, {float(norms.max()):.3g}]"
    return said
