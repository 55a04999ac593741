"""Quantizers whose parameters learn: the surrogate that gives their gradient rule.

A learned quantizer's backward gives the step, offset or clip its own gradient, written out
by hand from the straight-through formula; it is not the gradient of the rounded forward (a
gradient-mismatch on the parameter) and, where the check's input falls outside the
quantization window, the input itself may show no estimator at all. The families, each
written as the surrogate whose autograd gradient backward returns, ``round`` passed straight
through (``q + (q.round() - q).detach()``):

- **learned step** (LSQ) and **learned step and offset** (LSQ+): ``round(clamp((x - b) / s,
  lo, hi)) * s + b``; with a gradient scale ``g`` (LSQ's ``1 / sqrt(N * Qp)``) the step and
  offset enter as ``s * g + (s - s * g).detach()`` (value ``s``, gradient times ``g``); a
  per-channel step is laid along the first dimension;
- **a binary weight's learned scale** (1-bit LSQ, XNOR-Net++): ``sign(x) * s``, ``x``'s
  gradient passed inside ``[-s, s]``, ``s``'s ``sign(x)`` times ``g`` (``1 / sqrt(N)``);
- **learned clip** (PACT): ``min(max(x, lo), alpha)`` (or ``[-alpha, alpha]``): the input's
  gradient passes inside the range, ``alpha``'s is 1 where ``x >= alpha``.

The roles are read from the arguments (an element-wise input, small parameters with
gradients, numbers for bounds and scale); every candidate is run against backward on the
check's inputs and on inputs spread across the window (:mod:`gradsmith.checker.spread`)
before it is printed as checked.

References:
    Esser et al.: Learned Step Size Quantization, ICLR 2020. Bhalgat et al.: LSQ+: Improving
    low-bit quantization through learnable offsets and better initialization, CVPR
    Workshops 2020. Choi et al.: PACT: Parameterized Clipping Activation for Quantized Neural
    Networks, arXiv:1805.06085, 2018.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

from gradsmith.checker import spread, suggest, tensor_bounds
from gradsmith.checker.estimator_signature import Signature
from gradsmith.checker.numerics import InputResult
from gradsmith.checker.problem import Problem
from gradsmith.checker.session import Session


def fit(session: Session, problem: Problem, results: list[InputResult], v: torch.Tensor,
        grads: list[torch.Tensor]) -> tuple[dict[int, Signature], suggest.Declaration] | None:
    """The signatures of the failing inputs and the checked declaration, when backward is a
    learned quantizer's; None otherwise (the generic estimator path then runs)."""
    roles = _roles(session, problem, results)
    if roles is None:
        return None
    names = suggest.names(session)
    body = _fitted(session, names, roles, v, grads)
    if body is None:
        return None
    small = roles[1]
    factory = f"lambda: {suggest.render_args(session.subject.args.values)}"
    line = f"@gradsmith.example({factory}, surrogate=lambda {', '.join(names)}: {body})"
    sigs = {}
    for res in sorted(results, key=lambda r: r.t not in small):
        if res.failed:
            kind = "learned-quantizer" if res.t in small else "straight-through"
            sigs[res.t] = Signature(res.t, res.label, kind, total=problem.xs[res.t].numel())
    note = ("this backward matches it, also on inputs spread across the quantization window")
    return sigs, suggest.Declaration(line, True, note)


def _roles(session, problem, results) -> tuple[list[int], list[int]] | None:
    """(element-wise inputs, small parameters) when the shape of the call is a learned
    quantizer's: one output, a parameter with few elements whose gradient disagrees, and a
    forward that is flat in the element-wise input (rounded or clipped)."""
    problem.linearize()
    if len(problem.out_shapes) != 1 or any(r.nan_analytic for r in results):
        return None
    args = session.subject.args
    m = problem.m
    top = [t for t in range(len(problem.xs)) if args.position(t) is not None
           and not args.inputs[t].is_complex]
    wide = [t for t in top if problem.xs[t].numel() == m and m > 1]
    if len(wide) != 1:
        return None
    rows = problem.xs[wide[0]].shape[0] if problem.xs[wide[0]].dim() else 1
    small = [t for t in top if t not in wide and problem.xs[t].numel() <= max(1, rows)]
    failed = {r.t for r in results if r.failed}
    if not failed & set(small) or not _flat(problem, wide[0]):
        return None
    return wide, small


def _flat(problem: Problem, t: int) -> bool:
    """Forward unchanged by a small move of input ``t`` at half of its elements or more."""
    x = problem.xs[t]
    xs = list(problem.xs)
    xs[t] = x + 1e-7 * (1 + x.abs())
    try:
        base, moved = problem.value(), problem.value(xs, frozenset((t,)))
    except Exception:  # noqa: BLE001 - user code
        return False
    return bool((base == moved).to(torch.float64).mean() >= 0.5)


def _fitted(session, names, roles, v, grads) -> str | None:
    problem = session.problem
    split = problem.split(v)
    params = ", ".join(names)
    for body in _candidates(session, names, roles):
        fn = suggest.compile_source(f"lambda {params}: {body}", session)
        got = suggest.try_declaration(session, "surrogate", fn, split)
        if got is None or not all(suggest.matches(g, w, session) for g, w in zip(grads, got)):
            continue
        # and with a forward number it names (a bound, a gradient scale) moved
        if spread.holds(session, "surrogate", fn) and suggest.moved_holds(
                session, names, body, "surrogate", fn, split):
            return body
    return None


def _candidates(session, names, roles) -> Iterator[str]:
    """Learned step (and offset, gradient scale), then learned clip, as Python source."""
    problem = session.problem
    args = session.subject.args
    (t_x,), small = roles
    x, xv = names[args.position(t_x)], problem.xs[t_x]
    params = [(names[args.position(t)], problem.xs[t]) for t in small]
    taken = {names[args.position(t)] for t in [t_x, *small]}
    numbers = [(n, val) for n, val in suggest.numbers(session, names) if n not in taken]
    pairs = [(lo, hi) for lo, a in numbers for hi, b in numbers if a < b]
    scales = [None] + [n for n, val in numbers if 0 < val and val != 1]
    q, c, s_, b_ = (_fresh(base, names) for base in ("q", "c", "s_", "b_"))
    for s, sv in params:
        layouts = [""]
        if sv.numel() > 1 and xv.dim() > 1 and sv.numel() == xv.shape[0]:
            layouts.append(f".reshape(-1{', 1' * (xv.dim() - 1)})")
        offsets = [None] + [b for b, bv in params if b != s and bv.numel() == sv.numel()]
        for (lo, hi) in pairs:
            for g in scales:
                for layout in layouts:
                    for b in offsets:
                        yield _step(x, s, b, lo, hi, g, layout, q, c, s_, b_)
    for s, sv in params:  # a binary weight's learned scale (1-bit LSQ, XNOR-Net++)
        if sv.numel() == 1:
            for g in [None, f"(1 / {x}.numel() ** 0.5)"] + scales[1:]:
                yield _binary(x, s, g, c, s_)
    for a, av in params:
        if av.numel() != 1:
            continue
        for lo in ["0"] + [n for n, _ in numbers]:
            yield f"torch.minimum({x}.clamp(min={lo}), {a})"
        yield f"torch.maximum(torch.minimum({x}, {a}), -{a})"
    # clip edges that are tensors (a fixed lower clip, two learned clips) and PACT+ (levels
    # from a bit width), tried only when the number-edged ones above ran out
    yield from tensor_bounds.learned_clips(args.values, names, args.position(t_x),
                                           [n for n, _ in params], numbers)
    # a learned step divided by a number (LSQ written with the levels' range r: round(clamp(
    # x r / s, lo, hi)) s / r, the step s / r): tried after every plain step
    for s, sv in params:
        if sv.numel() != 1:
            continue
        for n in [n for n, val in numbers if val not in (0, 1)]:
            for (lo, hi) in pairs:
                for g in scales:
                    if n not in (lo, hi, g):
                        yield _step(x, f"({s} / {n})", None, lo, hi, g, "", q, c, s_, b_)


def _step(x, s, b, lo, hi, g, layout, q, c, s_, b_) -> str:
    """``round(clamp((x - b) / s, lo, hi)) * s + b``, round straight-through inside the
    window (outside it the bound itself, as backward's rule has it even for bounds that are
    not integers), ``s`` and ``b`` with their gradient scaled by ``g``."""

    def scaled(p: str, name: str) -> tuple[str, str]:
        value = p if g is None else f"({p} * {g} + ({p} - {p} * {g}).detach())"
        value = f"{value}{layout}" if layout else value
        if value == p:
            return p, p
        return f"({name} := {value})", name

    first_b, then_b = scaled(b, b_) if b is not None else ("", "")
    first_s, then_s = scaled(s, s_)
    shifted = f"({x} - {first_b})" if b is not None else x
    body = (f"((({c} := ({q} := {shifted} / {first_s}).clamp({lo}, {hi}))"
            f" + (torch.where({c} == {q}, {q}.round(), {c}) - {c}).detach()) * {then_s}")
    return body + (f" + {then_b})" if b is not None else ")")


def _binary(x, s, g, c, s_) -> str:
    """``sign(x) * s``: ``x``'s gradient passed inside ``[-s, s]``, ``s``'s the derivative
    ``sign(x)`` (times ``g``), as a 1-bit LSQ backward writes it (BiT's
    ``ElasticQuantBinarizerSigned`` at one bit: corpus 9b dev)."""
    scale = s if g is None else f"({s_} := {s} * {g} + ({s} - {s} * {g}).detach())"
    clip = f"({c} := {x}.clamp(-{s}.detach(), {s}.detach()))"
    return f"{clip} - {c}.detach() + torch.sign({x}) * {scale}"


def _fresh(base: str, names: list[str]) -> str:
    """A name for a walrus target that no forward parameter uses."""
    name = base
    while name in names:
        name += "_"
    return name
