"""Tensor arguments that forward never reads into its output: a surrogate's own parameters.

A learnable spike ``forward(ctx, x, alpha, beta)`` returns ``(x >= 0)`` and its backward
``grad * beta * alpha * s * (1 - s)``, ``s = sigmoid(alpha * x)``, with ``None`` for ``alpha``
and ``beta`` (corpus 9b held-out: ``LearnableSurrogate``). The surrogate that states it,
``beta * torch.sigmoid(alpha * x)``, gives ``alpha`` and ``beta`` a gradient under autograd that
backward, rightly, does not: forward's output does not depend on them. Written
``alpha.detach()``, the surrogate reads the argument the code uses and leaves its gradient out,
as backward does. Its numbers must be read from those arguments, not only agree at the
check's values (``2 * alpha`` equals ``beta`` at ``alpha = 0.5, beta = 1``): a term is kept only
where it also matches backward with each such argument moved (:func:`holds_moved`).

Only an argument forward ignores is detached: changed to other values, the outputs stay
exactly the same. A threshold the spike compares with (``membrane >= threshold``) changes the
output, so a surrogate keeps its gradient and a backward returning ``None`` for it (a learnable
threshold that never learns) still disagrees with the declaration.
"""

from __future__ import annotations

import torch

from gradsmith.checker.session import Session

#: Values an argument is moved by (added to it, and scaled), each must leave the output as is.
SHIFTS = (0.75, -1.5, 3.0)


def ignored(session: Session, t: int) -> bool:
    """Whether forward's outputs are exactly the same with input ``t`` moved to other values
    (False where forward fails on them: nothing is known then)."""
    subject = session.subject
    base = subject.base()
    try:
        with torch.no_grad():
            want = subject.select(subject.call([b.clone() for b in base]))
            for shift in SHIFTS:
                xs = [b.clone() for b in base]
                xs[t] = xs[t] * (1 + shift) + shift
                got = subject.select(subject.call(xs))
                if len(got) != len(want) or not all(
                        g.shape == w.shape and torch.equal(g, w) for g, w in zip(got, want)):
                    return False
    except Exception:  # noqa: BLE001 - user code on other values
        return False
    return True


def detached(session: Session, grads: list[torch.Tensor]) -> list[int]:
    """The 0-dim floating inputs that backward gives no gradient and forward ignores
    (:func:`ignored`), cached per check."""
    key = "ignored_args:detached"
    if key not in session.cache:
        args = session.subject.args
        session.cache[key] = [
            t for t, g in enumerate(grads)
            if (top := args.position(t)) is not None and bool((g == 0).all())
            and isinstance(args.values[top], torch.Tensor) and args.values[top].dim() == 0
            and args.values[top].is_floating_point() and ignored(session, t)]
    return session.cache[key]


def detached_names(session: Session, names: list[str], grads: list[torch.Tensor]
                   ) -> list[str]:
    """``names`` with ``name.detach()`` for each input of :func:`detached`."""
    out = list(names)
    for t in detached(session, grads):
        top = session.subject.args.position(t)
        out[top] = f"{names[top]}.detach()"
    return out


def holds_moved(session: Session, check, split: list[torch.Tensor],
                grads: list[torch.Tensor]) -> bool:
    """Whether ``check(xs, backward_grads)`` holds with every :func:`detached` input moved
    (each shift of :data:`SHIFTS` in turn); True when there is none. ``backward_grads`` are
    backward's gradients at ``xs`` for the incoming gradients ``split``."""
    moved = detached(session, grads)
    if not moved:
        return True
    for shift in SHIFTS:
        xs = [b.clone() for b in session.subject.base()]
        for t in moved:
            xs[t] = xs[t] * (1 + shift) + shift
        try:
            got = backward_at(session, xs, split)
        except Exception:  # noqa: BLE001 - user code on other values
            return False
        if not check([x.detach() for x in xs], got):
            return False
    return True


def backward_at(session: Session, xs: list[torch.Tensor], split: list[torch.Tensor]
                ) -> list[torch.Tensor]:
    """Backward's gradients of the differentiable inputs at values ``xs`` (every other
    argument as the subject builds it) for the incoming gradients ``split``; raises what the
    user's code raises."""
    subject = session.subject
    with torch.enable_grad():
        leaves = [x.detach().clone().requires_grad_(True) for x in xs]
        outs = subject.select(subject.call(leaves))
        got = torch.autograd.grad(outs, leaves, [v.to(o.dtype) for o, v in zip(outs, split)],
                                  allow_unused=True)
    return [torch.zeros_like(x) if g is None else g.detach() for g, x in zip(got, leaves)]
