"""The declaration line for a multi-output identity forward whose backward reroutes or
modifies gradients.

A forward that returns several of its inputs unchanged (``return t.detach(), y.detach()``,
``a.clone(), b.clone()``, in any order) has one output per input it passes through, so its true
gradient hands each output's gradient back to that input. A backward that does anything else
(drops one, hands it to another input, folds it into another's, scales or clips it) is the
gradient of no forward: event-time and stitching tricks in ODE solvers, gradient reversal on
several features at once. It is declared with ``intended=``, a function of the forward
arguments and one incoming gradient per output, named after the input each output passes
through (``intended=lambda t, y, grad_t, grad_y: (None, grad_y + grad_t)``).

Candidates, per differentiable input, built from the incoming gradients: ``None`` (backward
gives none), its own output's gradient unchanged, scaled (by the measured factor, named after a
forward argument when one matches), modified like a single identity's
(:func:`gradsmith.checker.suggest.modifications`), another output's gradient (rerouted, or
negated), or the sum of its own and another's. The chosen tuple is verified against backward
before it is suggested; without one, the line is a template with the real signature.
"""

from __future__ import annotations

import torch

from gradsmith.checker import declared, suggest
from gradsmith.checker.problem import Problem
from gradsmith.checker.session import Session


def declaration(session: Session, problem: Problem, sigs: dict, v: torch.Tensor,
                grads: list[torch.Tensor]) -> suggest.Declaration | None:
    """The ``intended=`` line for a forward with several outputs of which at least one passes
    a failing input through unchanged; None when that is not this Function's shape."""
    pieces = problem.split(v)
    if len(pieces) < 2 or not any(s.output is not None for s in sigs.values()):
        return None
    names = suggest.names(session)
    passes = _passes(session, sigs, pieces, grads)
    gnames = grad_names(session, names, passes, pieces)
    factory = f"lambda: {suggest.render_args(session.subject.args.values)}"
    params = ", ".join(names + gnames)
    found = _intended(session, names, gnames, sigs, passes, v, grads)
    if found is not None:
        return suggest.Declaration(f"@gradsmith.example({factory}, intended={found})", True)
    return suggest.Declaration(
        f"@gradsmith.example({factory}, intended=lambda {params}: ...)", False,
        "return what backward must return, one value per forward argument (None where there "
        "is none), from the forward arguments and one incoming gradient per output")


def _passes(session, sigs, pieces, grads) -> dict[int, int]:
    """Input -> the differentiable output that passes it through: measured for failing inputs
    (their signatures), read off the agreeing backward for the others."""
    passes = {t: s.output for t, s in sigs.items() if s.output is not None}
    for t, g in enumerate(grads):
        if t in sigs:
            continue
        for k, piece in enumerate(pieces):
            if piece.numel() == g.numel() and k not in passes.values() and suggest.matches(
                    g.reshape(-1), piece.reshape(-1).to(g.dtype), session):
                passes[t] = k
                break
    return passes


def grad_names(session: Session, names: list[str], passes: dict[int, int],
               pieces: list[torch.Tensor]) -> list[str]:
    """One parameter name per output of forward, as backward receives them: ``grad_<input>``
    for an output passing that input through, ``grad<i>`` for any other."""
    subject = session.subject
    count = len(declared.grad_outputs(session, pieces))
    through = {k: t for t, k in passes.items()}
    out: list[str] = []
    for pos in range(count):
        k = subject.out_pos.index(pos) if pos in subject.out_pos else None
        top = subject.args.position(through[k]) if k in through else None
        name = f"grad_{names[top]}" if top is not None else f"grad{pos}"
        while name in names or name in out:
            name += "_"
        out.append(name)
    return out


def _intended(session, names, gnames, sigs, passes, v, grads) -> str | None:
    subject = session.subject
    problem = session.problem
    split = problem.split(v)
    gname = {k: gnames[pos] for k, pos in enumerate(subject.out_pos)}
    numbers = suggest.numbers(session, names)
    params = ", ".join(names + gnames)
    chosen: dict[int, str] = {}
    for t, g in enumerate(grads):
        top = subject.args.position(t)
        if top is None or subject.args.inputs[t].is_complex:
            return None
        if bool((g == 0).all()):
            continue  # None
        for body in _candidates(session, names, t, sigs.get(t), passes.get(t), gname,
                                numbers):
            got = _evaluate(session, params, names, {top: body}, split)
            # a forward number it names must be read from (-alpha * g equals -g at alpha = 1)
            if got is not None and suggest.matches(g, got[t], session) and suggest.moved_holds(
                    session, names, body, "intended", suggest.compile_source(
                        _source(params, names, {top: body}), session), split, [t]):
                chosen[top] = body
                break
        else:
            return None
    if not chosen:
        return None
    got = _evaluate(session, params, names, chosen, split)
    if got is None or not all(suggest.matches(g, w, session) for g, w in zip(grads, got)):
        return None
    return _source(params, names, chosen)


def _candidates(session, names, t, sig, k, gname, numbers) -> list[str]:
    own = gname.get(k) if k is not None else None
    others = [name for j, name in gname.items() if j != k]
    out: list[str] = []
    if own is not None:
        out.append(own)
        if sig is not None and sig.kind == "scaled":
            # the factor as a forward number first, then as a literal where the number was
            # luck (-alpha equals -1 at alpha = 1 for a backward that ignores alpha)
            for factor in dict.fromkeys([sig.factor or suggest.factor(sig.scale, numbers),
                                         suggest.factor(sig.scale, [])]):
                out.append(f"-{own}" if factor == "-1" else f"{factor} * {own}")
        out += suggest.modifications(session, names, session.problem.xs[t], own)
        out += [f"{own} + {other}" for other in others]
    out += others + [f"-{other}" for other in others]
    return out


def _source(params: str, names: list[str], chosen: dict[int, str]) -> str:
    return f"lambda {params}: {suggest.returned(names, chosen)}"


def _evaluate(session, params, names, chosen, split) -> list[torch.Tensor] | None:
    fn = suggest.compile_source(_source(params, names, chosen), session)
    return suggest.try_declaration(session, "intended", fn, split)
