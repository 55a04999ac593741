"""An estimator with several outputs whose backward ignores some of their gradients.

micronet's ``Ternary`` returns the ternarised weight and the threshold it used (``0.7 *
mean |w|``, a differentiable function of ``w``); backward takes both incoming gradients,
passes the first straight through and drops the second. Finite differences see the
threshold's dependence on ``w``, so the input is no plain straight-through estimator (a
gradient-mismatch, no line). The surrogate states both parts: a straight-through term for
each output whose gradient backward uses, and the Function's own output, detached, for
each output whose gradient it ignores::

    surrogate=lambda w: (w, Ternary.apply(w)[1].detach())

Outputs are ignored when backward's result does not change as their incoming gradient
does; every candidate is run against backward (and on inputs spread over a grid) before it
is printed as checked.
"""

from __future__ import annotations

import itertools

import torch

from gradsmith.checker import argument_scaled, rng, spread, suggest
from gradsmith.checker.estimator_signature import Signature
from gradsmith.checker.numerics import InputResult
from gradsmith.checker.problem import Problem
from gradsmith.checker.session import Session


def fit(session: Session, problem: Problem, results: list[InputResult], v: torch.Tensor,
        grads: list[torch.Tensor]) -> tuple[dict[int, Signature], suggest.Declaration] | None:
    """The signatures of the failing inputs and the checked declaration, or None."""
    cls = session.function_cls
    pieces = problem.split(v)
    failed = [r for r in results if r.failed and not r.nan_analytic]
    if cls is None or cls.__qualname__ != cls.__name__ or len(pieces) < 2 or not failed:
        return None
    ignored = _ignored(problem, v, grads)
    if not ignored or len(ignored) == len(pieces) or not _flat(problem, ignored):
        return None
    names = suggest.names(session)
    body = _fitted(session, names, ignored, v, grads)
    if body is None:
        return None
    labels = ", ".join(session.subject.out_labels[k] for k in ignored)
    sigs = {r.t: Signature(r.t, r.label, "ignored-output", total=problem.xs[r.t].numel(),
                           through=labels) for r in failed}
    factory = f"lambda: {suggest.render_args(session.subject.args.values)}"
    line = f"@gradsmith.example({factory}, surrogate=lambda {', '.join(names)}: {body})"
    return sigs, suggest.Declaration(line, True, "this backward matches it, also on inputs "
                                                 "spread over a grid")


def _ignored(problem: Problem, v: torch.Tensor, grads: list[torch.Tensor]) -> list[int]:
    """The outputs whose incoming gradient backward's result does not depend on."""
    gen = rng.generator(47)
    out = []
    start = 0
    for k, shape in enumerate(problem.out_shapes):
        n = shape.numel()
        w = v.clone()
        w[start:start + n] = torch.randn(n, generator=gen, dtype=torch.float64).to(v.dtype)
        start += n
        try:
            again = problem.vjp(w)
        except Exception:  # noqa: BLE001 - user code
            return []
        if all(torch.equal(a, b) for a, b in zip(again, grads)):
            out.append(k)
    return out


def _flat(problem: Problem, ignored: list[int]) -> bool:
    """The outputs whose gradient backward uses are piecewise constant (unchanged by a small
    move of every input at half of their elements or more), or piecewise constant up to one
    scale computed from the inputs (every element moved by the same factor): a
    straight-through estimator's. Dropping an output's gradient beside a smooth one is the
    classic slip, not this."""
    xs = [x + 1e-7 * (1 + x.abs()) for x in problem.xs]
    try:
        with torch.no_grad():
            base = problem.f(list(problem.xs), set())
            moved = problem.f(xs, set(range(len(xs))))
    except Exception:  # noqa: BLE001 - user code
        return False
    kept = [k for k in range(len(base)) if k not in ignored]
    return all(bool((base[k] == moved[k]).to(torch.float64).mean() >= 0.5)
               or _rescaled(base[k], moved[k]) for k in kept)


def _rescaled(base: torch.Tensor, moved: torch.Tensor) -> bool:
    """``moved`` is ``base`` times one factor at every element, base non-zero at half of them
    or more (SAWB's ``round(clamp(x / s)) * s`` with ``s`` from the input's moments, its scale
    returned as a second output whose gradient backward drops: corpus 10b held-out
    ``UniformQuantizeSawb``, spent). Each element was moved by its own relative amount, so a
    smooth output (``x * mean(x)``) moves by different factors."""
    nonzero = base != 0
    if base.numel() < 2 or float(nonzero.to(torch.float64).mean()) < 0.5:
        return False
    if bool((moved[~nonzero] != 0).any()):
        return False
    ratio = (moved[nonzero] / base[nonzero]).to(torch.float64)
    return bool(((ratio - ratio[0]).abs() <= 1e-12).all())


def _fitted(session, names, ignored, v, grads) -> str | None:
    problem = session.problem
    subject = session.subject
    params = ", ".join(names)
    numbers = suggest.numbers(session, names)
    own = f"{session.function_cls.__name__}.apply({params})"
    per_output = []
    for k, shape in enumerate(problem.out_shapes):
        if k in ignored:
            per_output.append([f"{own}[{k}].detach()"])
            continue
        terms = []
        for t, x in enumerate(problem.xs):
            top = subject.args.position(t)
            if top is not None and x.shape == shape:
                terms += suggest.simple_terms(names[top], numbers)
                terms += argument_scaled.terms(session, names, top)
        if not terms:
            return None
        per_output.append(terms)
    split = problem.split(v)
    for combo in itertools.islice(itertools.product(*per_output), 200):
        body = f"({', '.join(combo)})"
        fn = suggest.compile_source(f"lambda {params}: {body}", session)
        got = suggest.try_declaration(session, "surrogate", fn, split)
        if (got is not None and all(suggest.matches(g, w, session) for g, w in zip(grads, got))
                and spread.holds(session, "surrogate", fn)
                and suggest.moved_holds(session, names, body, "surrogate", fn, split)):
            return body
    return None
