"""Surrogate terms for a linear layer with a binarised weight (BinaryConnect, XNOR-Net).

AdaSTE's ``BinaryLinearFunction`` computes ``input @ sign(W).T + bias`` (``sign`` with +1 at
0) and returns ``grad @ sign(W)`` for the input (exact) and ``grad.T @ input`` for the weight:
the gradient with respect to the binarised weight passed straight through to ``W``. No
element-wise term gives the weight's gradient (it is a matrix product), so the estimator got a
template (corpus 7b held-out, issue 18). The term writes the layer with the weight's
straight-through binarisation, ``F.linear(x, W + (q(W) - W).detach(), bias)``, for the
usual binarisations ``q``: ``torch.where(W >= 0, 1.0, -1.0)`` and ``torch.sign(W)``. Each
term is only a candidate: it is verified against backward like every other term.

References:
    Courbariaux, Bengio, David: BinaryConnect: Training Deep Neural Networks with binary
    weights during propagations, NeurIPS 2015.
"""

from __future__ import annotations

import torch

from gradsmith.checker.session import Session

_BINARISED = ("torch.where({w} >= 0, 1.0, -1.0)", "torch.sign({w})")


def terms(session: Session, names: list[str], top: int) -> list[str]:
    """Candidate terms for forward argument ``top`` (the layer's input): one per binarisation
    of each 2-D floating argument that can be its weight (its last size equals the input's),
    with the 1-D argument of the weight's first size as the bias when there is one.

    Example:
        >>> import torch
        >>> class S:  # a stand-in for the session: the forward's arguments
        ...     class subject:
        ...         class args:
        ...             values = (torch.ones(3, 4), torch.ones(5, 4), None)
        >>> terms(S, ["x", "w", "bias"], 0)[0]
        'torch.nn.functional.linear(x, w + (torch.where(w >= 0, 1.0, -1.0) - w).detach(), bias)'
    """
    values = session.subject.args.values
    x = values[top]
    if not _floating(x) or x.dim() < 1:
        return []
    out = []
    for i, w in enumerate(values):
        if i == top or not _floating(w) or w.dim() != 2 or w.shape[-1] != x.shape[-1]:
            continue
        bias = next((names[j] for j, b in enumerate(values) if j not in (i, top) and (
            b is None and "bias" in names[j] or _floating(b) and tuple(b.shape) == (
                w.shape[0],))), "None")
        for q in _BINARISED:
            straight = f"{names[i]} + ({q.format(w=names[i])} - {names[i]}).detach()"
            out.append(f"torch.nn.functional.linear({names[top]}, {straight}, {bias})")
    return out


def _floating(value) -> bool:
    return isinstance(value, torch.Tensor) and value.is_floating_point()
