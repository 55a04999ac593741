"""An estimator whose backward ignores a number that shifts forward's step.

binarized-neural-networks' ``Sign`` (corpus 14b dev) returns ``sign(x - offset_x)`` and
passes the gradient on ``|x| < width``: the offset-aware window is commented out, so the
window stays centred at 0 while the step sits at ``offset_x``. At the default offset 0 the
two agree, and the clipped straight-through surrogate ``x.clamp(-1, 1)`` matched backward:
the line was printed as checked and, pasted, the row passed, hiding the defect.

The test follows from what a shift means. A number ``p`` shifts forward when moving ``x`` and
``p`` together by the same ``d`` leaves every output unchanged (``f(x + d; p + d) = f(x; p)``:
a threshold, an offset). Then any estimator of that forward, written for its step, is the
same function of ``x - p``, so backward must give the same gradient at ``(x + d, p + d)`` as
at ``(x, p)``. When it does not, the harm is shown at the moved inputs: forward's step lies
among them exactly as before, and backward gives them another gradient (for ``Sign``, none at
all: its window stayed at 0). Only a single differentiated input is moved, by an integer
``d`` beyond the inputs' spread (so a rounding forward rounds the same values).
"""

from __future__ import annotations

import math

import torch

from gradsmith.checker.ignored_args import backward_at
from gradsmith.checker.session import Session


def ignored(session: Session, names: list[str]) -> str | None:
    """A sentence naming the number that shifts forward's step while backward ignores it,
    or None (no such number, several differentiated inputs, or user code raising)."""
    subject = session.subject
    args = subject.args
    base = subject.base()
    if len(base) != 1 or not base[0].is_floating_point() or base[0].numel() == 0:
        return None
    if any(callable(v) and not isinstance(v, torch.Tensor) for v in args.values):
        return None  # backward may hand the number to a callable argument: its contract
    x = base[0].detach()
    d = float(math.ceil(3 * float(x.abs().max())) + 1)
    diff = {inp.leaf for inp in args.inputs}
    for i, value in enumerate(args.values):
        if (isinstance(value, bool) or not isinstance(value, (int, float))
                or i >= len(names)):
            continue
        leaf = next((j for j in range(len(args.labels))
                     if args.top_index[j] == i and args.leaf(j) is value), None)
        if leaf is None or leaf in diff:
            continue
        moved = value + (int(d) if isinstance(value, int) else d)
        found = _shifted(session, x, d, leaf, moved)
        if found is not None:
            return (f"`{names[i]}` shifts forward's step (moving the input and {names[i]} "
                    f"together by {d:g} leaves forward unchanged) but backward does not follow "
                    f"it: at {names[i]} = {moved:g} and the input moved by {d:g}, backward "
                    f"gives {found}, against its gradient at {names[i]} = {value:g}. An "
                    f"estimator of a shifted step must be a function of the input minus "
                    f"{names[i]}")
    return None


def _shifted(session: Session, x: torch.Tensor, d: float, leaf: int, moved) -> str | None:
    subject = session.subject
    v = torch.randn(session.problem.m, generator=session.generator(23), dtype=torch.float64)
    try:
        before = _outputs(session, [x])
        input_only = _outputs(session, [x + d])
        split = session.problem.split(v.to(x.dtype))
        want = backward_at(session, [x], split)
        with subject.args.swapped({leaf: moved}):
            after = _outputs(session, [x + d])
            number_only = _outputs(session, [x])
            got = backward_at(session, [x + d], split)
    except Exception:  # noqa: BLE001 - user code outside its domain: says nothing
        return None
    if not before or not _same(before, after):
        return None  # the number does not shift forward
    if _same(before, input_only) or _same(before, number_only):
        return None  # forward ignores the move of one of them (a softmax's shift, a
        # temperature of a hard argmax): no step sits at the number
    if all(bool((o == o.flatten()[0]).all()) for o in before):
        return None  # a constant forward has no step to follow
    a, b = want[0], got[0]
    if a.shape != b.shape or torch.allclose(a.double(), b.double(), atol=1e-6, rtol=1e-5):
        return None
    nonzero = int((b != 0).sum())
    return (f"a non-zero gradient at {nonzero} of {b.numel()} elements (at the original "
            f"values: {int((a != 0).sum())})")


def _outputs(session: Session, xs: list[torch.Tensor]) -> list[torch.Tensor]:
    subject = session.subject
    with torch.no_grad():
        outs = subject.select(subject.call([t.clone() for t in xs]))
    return [o.detach() for o in outs]


def _same(xs: list[torch.Tensor], ys: list[torch.Tensor]) -> bool:
    return len(xs) == len(ys) and all(
        a.shape == b.shape and torch.allclose(a.double(), b.double(), atol=1e-6)
        for a, b in zip(xs, ys))
