"""``intended=`` terms for a gradient replaced by constants outside a window.

nni's ``ramp`` clamps its input to ``[0, 1]`` and its backward writes ``0.01`` where the
input is below 0 and ``-0.01`` where it is above 1, whatever the incoming gradient (a push
back into the range), passing the gradient through inside: ``torch.where(x < 0, 0.01,
torch.where(x > 1, -0.01, grad))``. The window's ends are tried from 0, 1, -1 and the
forward's numbers; the constants are read from backward itself, at an input filled with
one value just outside each end, for two incoming gradients (a constant does not follow
them). The caller verifies each term against backward before it is suggested.
"""

from __future__ import annotations

import torch

from gradsmith.checker import rng
from gradsmith.checker.problem import Problem
from gradsmith.checker.session import Session
from gradsmith.checker.surrogate_fit import _shortest

EDGES = (("0", 0.0), ("1", 1.0), ("-1", -1.0))


def candidates(session: Session, name: str, t: int, grad: str,
               numbers: list[tuple[str, float]]) -> list[str]:
    """``torch.where`` terms for input ``t`` (named ``name``), most common window first."""
    edges = list(dict.fromkeys([*EDGES, *numbers]))
    out = []
    for lo_name, lo in edges:
        for hi_name, hi in edges:
            if not lo < hi:
                continue
            margin = 0.25 * (hi - lo)
            below, above = _constant(session, t, lo - margin), _constant(session, t, hi + margin)
            if below is None and above is None:
                continue
            body = grad
            if above is not None:
                body = f"torch.where({name} > {hi_name}, {_shortest(above)}, {body})"
            if below is not None:
                body = f"torch.where({name} < {lo_name}, {_shortest(below)}, {body})"
            out.append(body)
    return out


def _constant(session: Session, t: int, value: float) -> float | None:
    """Backward's value for input ``t`` filled with ``value`` when it is one constant that
    does not follow the incoming gradient, else None."""
    problem = session.problem
    x = problem.xs[t]
    xs = list(problem.xs)
    xs[t] = torch.full_like(x, value)
    other = Problem(problem.f, xs, problem.labels, accumulate=problem.accumulate,
                    backward_seed=problem.backward_seed)
    gen = rng.generator(43)
    try:
        other.linearize()
        results = [other.vjp(torch.randn(other.m, generator=gen, dtype=torch.float64)
                             .to(x.dtype))[t] for _ in range(2)]
    except Exception:  # noqa: BLE001 - user code outside its domain
        return None
    first = results[0].reshape(-1)
    if first.numel() == 0 or not torch.equal(results[0], results[1]):
        return None
    c = float(first[0])
    if not bool((first == c).all()) or c == 0.0:
        return None  # 0 is a plain mask, which the straight-through families already write
    return c
