"""Surrogate terms for a straight-through gradient scaled element by element by an argument.

A quantiser for incremental quantisation (INQ) freezes the weights it has already quantised:
forward rounds ``w`` (piecewise constant), backward returns ``grad * mask`` with ``mask`` a
0/1 tensor the caller passes in (csyhhu's ``Function_unbiased_quantize_STE``, corpus 8b
held-out, issue 18). No term of ``w`` alone gives that gradient, so the estimator got a
template. Its honest surrogate is ``w * mask``: autograd of it gives ``grad * mask`` for ``w``
and nothing for ``mask`` (a setting, not differentiated). The terms are one per floating
forward argument of ``w``'s shape that is not differentiated; each is only a candidate,
verified against backward (and on inputs spread over a grid) like every other term.
"""

from __future__ import annotations

import torch

from gradsmith.checker.session import Session


def terms(session: Session, names: list[str], top: int) -> list[str]:
    """``x * m`` for forward argument ``top`` (``x``) and every floating, non-differentiated
    forward argument ``m`` of ``x``'s shape.

    Example:
        >>> import torch
        >>> class S:  # a stand-in for the session: the forward's arguments
        ...     class subject:
        ...         class args:
        ...             values = (torch.ones(3, 4, requires_grad=True), 3, torch.ones(3, 4))
        >>> terms(S, ["w", "bits", "mask"], 0)
        ['w * mask']
    """
    values = session.subject.args.values
    x = values[top]
    if not _floating(x):
        return []
    return [f"{names[top]} * {names[i]}" for i, m in enumerate(values)
            if i != top and _floating(m) and not m.requires_grad and m.shape == x.shape]


def _floating(value) -> bool:
    return isinstance(value, torch.Tensor) and value.is_floating_point()
