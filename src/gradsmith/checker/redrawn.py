"""A checked declaration line also holds for the values the pasted line draws afresh.

A suggested line is checked against backward at the check's own argument values, but it is
printed with ``torch.randn(...)`` for tensors too large to write by value; a non-differentiated
one among them (a mask, a codebook, a per-channel setting) is then drawn anew when the line is
pasted. A declaration whose numbers were fitted to the check's draw (``x.clamp(-2.67,
-0.03)`` read off a ``clip_val`` tensor) agrees with backward at that draw and FAILs as
pasted. Here such arguments are redrawn as the pasted line would draw them, and the
declaration is compared with backward once more: a line that disagrees, or whose Function
does not run on the redrawn values, is not called checked.
"""

from __future__ import annotations

import torch

from gradsmith.checker import rng, spread, suggest
from gradsmith.checker.session import Session

#: The keywords of a printed line's declaration: ``kind=lambda ...`` up to its closing paren.
KINDS = ("surrogate", "intended")


def holds(session: Session, line: str) -> bool:
    """Whether the declaration in ``line`` still gives backward's gradients with every
    tensor the line writes as ``torch.randn`` drawn afresh: non-differentiated ones, and
    differentiated ones at a fresh draw and its negation (True when the line draws none, or
    states no fitted declaration)."""
    args = session.subject.args
    drawn = [i for i in args.constant_pos
             if args.leaf(i).dim() > 0 and args.leaf(i).numel() > suggest.BY_VALUE]
    # differentiated tensors are printed as torch.randn too: a step fitted where the check's
    # draw was negative (clamped to eps: every element clipped) fails where it is positive
    printed = [i for i in args.diff_pos if isinstance(args.leaf(i), torch.Tensor)
               and args.leaf(i).dim() > 0 and "torch.randn(" in line]
    parsed = _declaration(line, session)
    if not (drawn or printed) or parsed is None:
        return True
    kind, fn = parsed
    gen = rng.generator(31)
    values = {i: torch.randn(args.leaf(i).shape, generator=gen, dtype=torch.float64).to(
        args.leaf(i).dtype) for i in drawn + printed}
    if not printed:
        return _holds_at(session, kind, fn, values, gen)
    # both signs of the differentiated draws: the pasted line may draw either
    flipped = {i: -t if i in printed else t for i, t in values.items()}
    return _holds_at(session, kind, fn, values, gen) and _holds_at(
        session, kind, fn, flipped, gen)


def _holds_at(session: Session, kind: str, fn, values: dict, gen) -> bool:
    """Whether declaration ``fn`` gives backward's gradients with ``values`` swapped in."""
    args = session.subject.args
    saved = session.cache.get("problem")
    with args.swapped(values):
        try:
            problem = session.cache["problem"] = session.subject.problem()
            problem.linearize()
            v = torch.randn(problem.m, generator=gen, dtype=torch.float64)
            got = problem.vjp(v)
        except Exception:  # noqa: BLE001 - user code: the pasted line would not run either
            _restore(session, saved)
            return False
        try:
            want = spread.declared_gradients(session, kind, fn, problem.xs, problem.split(v))
            # at the check's point and with each element-wise input spread over the grid
            return (want is not None
                    and all(spread.agree(g, w, session) for g, w in zip(got, want))
                    and spread.holds(session, kind, fn))
        finally:
            _restore(session, saved)


def _restore(session: Session, problem) -> None:
    if problem is None:
        session.cache.pop("problem", None)
    else:
        session.cache["problem"] = problem

def _declaration(line: str, session: Session):
    """(kind, compiled lambda) of the declaration a printed line states, or None."""
    for kind in KINDS:
        head = f", {kind}=lambda "
        if head in line and line.endswith(")"):
            source = line[line.index(head) + len(kind) + 3:-1]
            if source.rstrip().endswith("..."):
                return None  # a template: nothing is claimed
            fn = suggest.compile_source(source, session)
            return None if fn is None else (kind, fn)
    return None
