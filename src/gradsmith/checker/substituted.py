"""A backward that is forward's gradient with one argument standing in for another.

Feedback alignment (Lillicrap et al. 2016) trains a linear layer with ``grad_input = grad @ B``,
``B`` a fixed random matrix passed to forward beside the weight ``W`` it replaces: backward is
the gradient of ``input @ B.T`` for the input, of ``input @ W.T`` for the weight. The signature:
for a failing input, backward agrees (element by element, at the elements the gradients check
examined) with finite differences of forward evaluated with a same-shaped tensor argument ``B``
in place of another ``A``, and not with forward as called, where forward does not read ``B`` at
all (an argument passed only for backward). A backward that uses one of forward's own tensors in
place of another (``W2`` for ``W1``) is a wrong-tensor slip, and stays a gradient-mismatch.

References:
    Lillicrap, Cownden, Tweed, Akerman: Random synaptic feedback weights support error
    backpropagation for deep learning, Nature Communications 2016.
"""

from __future__ import annotations

import torch

from gradsmith.checker import numerics

ELEMENTS = 16  # elements compared (the declaration is then verified on all of them)
PAIRS = 6  # argument pairs tried


def signature(session, res, v: torch.Tensor, a: torch.Tensor, tol: torch.Tensor,
              idx: torch.Tensor) -> tuple[int, int] | None:
    """``(A, B)`` when backward for input ``res.t`` is the gradient of forward with argument
    ``B`` (a forward argument's position: a tensor, differentiated or not) in place of the
    differentiable input ``A``, or None."""
    problem = session.problem
    args = session.subject.args
    xs = problem.xs
    t = res.t
    if a.numel() < 2:
        return None
    V = v.to(torch.float64)
    h = session.settings.h
    a, tol, idx = a[:ELEMENTS], tol[:ELEMENTS], idx[:ELEMENTS]
    own = args.position(t)
    pairs = [(ia, ib) for ia, xa in enumerate(xs) if ia != t and xa.is_floating_point()
             for ib, value in enumerate(args.values)
             if ib not in (own, args.position(ia)) and isinstance(value, torch.Tensor)
             and value.is_floating_point() and value.shape == xa.shape]
    for ia, ib in pairs[:PAIRS]:
        if not _unused(session, ib):
            continue  # forward reads B too: a wrong tensor in backward, not a stand-in
        swapped = list(xs)
        swapped[ia] = args.values[ib].detach().to(xs[ia].dtype)
        try:
            n = torch.tensor([_quotient(problem, swapped, t, j, h, V) for j in idx.tolist()],
                             dtype=torch.float64)
        except Exception:  # noqa: BLE001 - user code on swapped arguments: not this pair
            continue
        if bool(((a - n).abs() <= tol).all()) and bool((n.abs() > tol).any()):
            return ia, ib
    return None


def _quotient(problem, xs, t, j, h, V) -> float:
    """``d (V . f) / d x_t[j]`` by central differences, at the inputs ``xs``."""
    step = numerics.step(problem, t, j, h)
    delta = torch.zeros_like(xs[t]).reshape(-1)
    delta[j] = step
    delta = delta.reshape(xs[t].shape)
    values = []
    for sign in (1, -1):
        moved = list(xs)
        moved[t] = xs[t] + sign * delta
        values.append(problem.value(moved, frozenset((t,))).to(torch.float64))
    return float(V @ (values[0] - values[1])) / (2 * step)


quotient = _quotient  # shared with :mod:`gradsmith.checker.relaxed_abs`


def _unused(session, ib: int) -> bool:
    """Forward's outputs do not change when argument ``ib`` does (it is passed for backward)."""
    subject = session.subject
    base = subject.base()
    try:
        with torch.no_grad():
            args = list(subject.build([x.clone() for x in base]))
            ref = subject.select(subject.run_built(tuple(args)))
            args = list(subject.build([x.clone() for x in base]))
            args[ib] = args[ib] + 1.0
            moved = subject.select(subject.run_built(tuple(args)))
    except Exception:  # noqa: BLE001 - user code
        return False
    return all(torch.equal(a, b) for a, b in zip(ref, moved))
