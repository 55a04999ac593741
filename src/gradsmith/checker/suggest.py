"""The ``@gradsmith.example(..., surrogate=...)`` (or ``intended=...``) line that declares an
estimator, written for the Function at hand: its real forward signature, the inputs the check
used, and a declaration that fits what was detected, verified against the Function's own
backward before it is suggested.

Candidates, per differentiated input (named by its forward parameter):

- straight-through: ``x`` (identity backward), ``x.clamp(-1, 1)``, ``x.clamp(0, 1)``,
  ``x.clamp(lo, hi)`` from the forward's numeric arguments, ``torch.tanh(x)``,
  ``torch.sigmoid(x)``, ``x * (Fn.apply(x) != 0)`` (masked by forward's own output, a
  Bernoulli sample's); an input whose backward is 0 is left out; the surrogate is their
  sum.
- scaled (reversal, scaling) with an identity forward: ``intended=lambda x, alpha, grad:
  (-alpha * grad, None)``, the factor named after a forward argument when one matches it;
  with another forward in the setup_context style, ``surrogate=lambda ...: c * Fn.forward(...)``.
- modified (an identity forward whose backward changes the gradient otherwise):
  ``intended=`` with ``grad`` clipped by a forward number, masked by the sign of a
  same-shaped argument, centred along a dim, or masked and centred (the projection onto a
  simplex face's tangent space: the sparsemax Jacobian).
- anything else with one output (an added loss, a sign flip that keeps a parameter in range,
  guided backpropagation, blackbox differentiation): an ``intended=`` fitted per input
  (:mod:`gradsmith.checker.intended_fit`).
- sampled (a random backward whose mean over draws is the gradient): ``unbiased=True``;
  another random backward gets an ``intended=`` template (only the user knows its draws).

When no candidate reproduces the backward, the line is a template to complete.
"""

from __future__ import annotations

import itertools
import keyword
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from gradsmith.checker import (
    argument_scaled,
    binarised,
    clamped_forward,
    declared,
    gathered,
    ignored_args,
    literal_clip,
    moved_numbers,
    rng,
    shifted_step,
    spread,
    surrogate_fit,
    tensor_bounds,
)
from gradsmith.checker.inputs import _parameter_names, overrides
from gradsmith.checker.problem import Problem

# re-exported (BY_VALUE, has_placeholder, render_args): the other declaration writers use them
from gradsmith.checker.rendering import BY_VALUE as BY_VALUE
from gradsmith.checker.rendering import flat as _flat
from gradsmith.checker.rendering import has_placeholder as has_placeholder
from gradsmith.checker.rendering import render_args as render_args
from gradsmith.checker.session import Session


@dataclass(frozen=True)
class Declaration:
    """A suggested declaration: the decorator line, and whether it reproduces backward."""

    line: str
    verified: bool
    note: str = ""


def declaration(session: Session, problem: Problem, sigs: dict, v: torch.Tensor,
                grads: list[torch.Tensor]) -> Declaration:
    """The declaration line for the detected estimator signatures ``sigs`` (input -> sig)."""
    names = _names(session)
    factory = f"lambda: {render_args(session.subject.args.values, home=_home(session))}"
    params = ", ".join(names)
    surrogate = _surrogate(session, names, sigs, v, grads)
    if surrogate is not None and not surrogate[1]:
        line = f"@gradsmith.example({factory}, surrogate=lambda {params}: {surrogate[0]})"
        shift = shifted_step.ignored(session, names)  # pasted, the line would FAIL on it
        return Declaration(line, True) if shift is None else Declaration(
            line, False, f"not checked: {shift}")
    from gradsmith.checker import intended_fit  # it builds on this module's helpers

    found = (_scaled(session, names, sigs, v, grads)
             or _modification(session, names, sigs, v, grads)
             or intended_fit.declaration(session, names, sigs, v, grads))
    if found is not None:
        return Declaration(f"@gradsmith.example({factory}, {found})", True)
    if surrogate is not None:  # forward's surrogate, which backward follows but for some inputs
        body, dropped = surrogate
        return Declaration(f"@gradsmith.example({factory}, surrogate=lambda {params}: {body})",
                           False, DROPPED.format(them=", ".join(dropped), first=dropped[0]))
    if any(s.kind in ("scaled", "modified", "guided", "relaxed-abs") for s in sigs.values()):
        grad = _grad_name(names)
        return Declaration(
            f"@gradsmith.example({factory}, intended=lambda {params}, {grad}: ...)", False,
            "return what backward must return, one value per forward argument")
    return Declaration(
        f"@gradsmith.example({factory}, surrogate=lambda {params}: ...)", False,
        "the forward written with each piecewise-constant op q(t) as `t + (q(t) - t).detach()`, "
        "so that its autograd gradient is the intended one")


#: The note of a surrogate that backward follows for some inputs and drops for others.
DROPPED = ("not checked: this surrogate of forward matches backward except that it also gives "
           "{them} a gradient, which backward does not return although forward's output "
           "depends on it; if {them} is meant to learn (a learnable threshold), backward must "
           "return that gradient; if not, write `{first}.detach()` in the surrogate")


def unbiased(session: Session) -> Declaration:
    """``@gradsmith.example(..., unbiased=True)``: a random backward whose mean over draws is
    forward's gradient (verified by the caller's mean test, the one the declaration runs)."""
    factory = f"lambda: {render_args(session.subject.args.values)}"
    return Declaration(f"@gradsmith.example({factory}, unbiased=True)", True)


def random_intended(session: Session) -> Declaration:
    """A template ``intended=`` for a random backward that is not unbiased: only the user
    knows which random numbers it draws, so gradsmith cannot write (or verify) it."""
    names = _names(session)
    factory = f"lambda: {render_args(session.subject.args.values)}"
    return Declaration(
        f"@gradsmith.example({factory}, intended=lambda {', '.join(names)}, "
        f"{_grad_name(names)}: ...)", False,
        "return what backward must return, one value per forward argument, drawing the same "
        "random numbers in the same order: intended= runs from backward's random state and is "
        "compared draw for draw")


def names(session: Session) -> list[str]:
    """The forward's parameter names, made valid and unique (``arg3`` where they are not)."""
    return _names(session)


def _names(session: Session) -> list[str]:
    args = session.subject.args
    raw = _parameter_names(session.subject.target, args.n_args)[:args.n_args]
    out = []
    for i, name in enumerate(raw):
        ok = name.isidentifier() and not keyword.iskeyword(name) and name not in out
        out.append(name if ok else f"arg{i}")
    return out


def _grad_name(names: list[str]) -> str:
    return next(n for n in ("grad", "grad_output", "g_out") if n not in names)


def _numbers(session: Session, names: list[str]) -> list[tuple[str, float]]:
    """Numeric forward arguments (Python numbers, 0-dim floating tensors), by name, then the
    elements of a short 1-dim floating tensor (``clip_val[1]``: a quantizer's clip range
    given as one tensor, BiBERT's; a window edge printed as its literal value is right only
    at the printed example's range)."""
    args = session.subject.args
    found, elements = [], []
    for i, value in enumerate(args.values):
        if isinstance(value, bool):
            continue
        if isinstance(value, (int, float)):
            found.append((names[i], float(value)))
        elif (isinstance(value, torch.Tensor) and value.dim() == 0
              and value.is_floating_point()):
            found.append((names[i], float(value.detach())))
        elif (isinstance(value, torch.Tensor) and value.dim() == 1
              and value.is_floating_point() and 1 < value.numel() <= ELEMENTS):
            elements += [(f"{names[i]}[{j}]", float(e))
                         for j, e in enumerate(value.detach().tolist())]
    return found + elements


#: The longest 1-dim tensor argument whose elements are named as numbers.
ELEMENTS = 4


def _terms(name: str, numbers: list[tuple[str, float]]) -> list[str]:
    terms = [name, f"{name}.clamp(-1, 1)", f"{name}.clamp(0, 1)"]
    for p, value in numbers:
        if value > 0:
            terms += [f"{name}.clamp(-{p}, {p})", f"{name}.clamp(0, {p})"]
    for i, (p, lo) in enumerate(numbers):
        for q, hi in numbers[i + 1:]:
            if lo < hi:
                terms.append(f"{name}.clamp({p}, {q})")
    return terms + [f"torch.tanh({name})", f"torch.sigmoid({name})"]


def _masked_by_output(session: Session, names: list[str], top: int) -> list[str]:
    """``x * (Fn.apply(...) != 0)``: the gradient passed where forward's own output is not 0
    (a Bernoulli sample's straight-through estimator masked by the sample: the surrogate
    runs from forward's random state, so it draws the same sample)."""
    cls = session.function_cls
    if cls is None or cls.__qualname__ != cls.__name__ or len(session.problem.out_shapes) != 1:
        return []
    return [f"{names[top]} * ({cls.__name__}.apply({', '.join(names)}) != 0)"]


def _clamped(session: Session, names: list[str], top: int, t: int,
             numbers: list[tuple[str, float]]) -> Iterator[str]:
    """:func:`clamped_forward.terms`, computed only when the simpler terms ran out (its
    bisection calls forward a hundred times)."""
    yield from clamped_forward.terms(session, names, top, t, numbers)


def _compile(source: str, session: Session) -> Any:
    namespace = {"torch": torch}
    cls = session.function_cls
    if cls is not None:
        namespace[cls.__name__] = cls
    try:
        return eval(source, namespace)  # noqa: S307 - a lambda gradsmith wrote itself
    except SyntaxError:
        return None


def _matches(got: torch.Tensor, want: torch.Tensor, session: Session) -> bool:
    s = session.settings
    return got.shape == want.shape and bool(
        ((got - want).abs() <= s.atol + s.rtol * want.abs()).all())


def _try(session: Session, kind: str, fn: Any, v: torch.Tensor, problem_xs, split
         ) -> list[torch.Tensor] | None:
    if fn is None:
        return None
    saved = session.surrogate, session.intended
    session.surrogate, session.intended = (fn, None) if kind == "surrogate" else (None, fn)
    try:
        return declared.reference(session)(problem_xs, split)
    except declared.DeclarationError:
        return None
    finally:
        session.surrogate, session.intended = saved


def _surrogate(session, names, sigs, v, grads) -> str | None:
    """A sum of per-input terms whose autograd gradient is backward's, or None."""
    problem = session.problem
    split = problem.split(v)
    if len(split) != 1:
        return None
    subject = session.subject
    # a parameter forward ignores (a learnable surrogate's slope) as ``alpha.detach()``
    numbers = _numbers(session, ignored_args.detached_names(session, names, grads))
    params = ", ".join(names)
    chosen = []
    for t in range(len(subject.labels)):
        sig = sigs.get(t)
        if sig is not None and sig.kind == "scaled":
            return None
        if bool((grads[t] == 0).all()):
            continue  # backward gives no gradient: the surrogate leaves the input out
        top = subject.args.position(t)
        if top is None or subject.args.inputs[t].is_complex:
            return None  # nested, a parameter, complex: no plain term to write
        if chosen:  # a slope argument's gradient may come with another input's term
            got = _try(session, "surrogate", _compile(
                f"lambda {params}: {' + '.join(chosen)}", session), v, problem.xs, split)
            if got is not None and _matches(grads[t], got[t], session):
                continue
        # a row lookup's term first: the identity alone also fits the picking input, and
        # then no term is left for the table
        lookup = (gathered.terms(session, names, top)
                  if sig is not None and sig.kind == "straight-through" else [])
        lookup += binarised.terms(session, names, top)  # x @ sign(W).T, W straight through
        simple: Iterable[str] = (lookup + _terms(names[top], numbers)
                                 + _masked_by_output(session, names, top)
                                 + argument_scaled.terms(session, names, top)
                                 + tensor_bounds.terms(subject.args.values, names, top, numbers))
        # every examined element in a clamped tail reads as plain straight-through
        if sig is not None and sig.kind in ("straight-through", "straight-through-saturating"):
            simple = itertools.chain(simple, _clamped(session, names, top, t, numbers))
        for term in surrogate_fit.terms(session, names[top], t, v, grads[t], numbers, simple):
            fn = _compile(f"lambda {params}: {term}", session)
            got = _try(session, "surrogate", fn, v, problem.xs, split)
            # agreeing at the check's inputs may be luck (no element between -1 and a window
            # edge at -0.86): the term must also agree with the input spread over a grid
            if (got is not None and _matches(grads[t], got[t], session)
                    and spread.holds(session, "surrogate", fn, [t])
                    and ignored_args.holds_moved(session, lambda xs, want, fn=fn, t=t: _agrees(
                        session, fn, xs, split, want, t), split, grads)
                    # a Python number it names must be read from (2 * w equals 1 at w = 0.5)
                    and moved_numbers.holds(session, names, term, lambda xs, want, fn=fn, t=t:
                                            _agrees(session, fn, xs, split, want, t), split)):
                chosen.append(term)
                break
        else:
            return None
    if not chosen:
        return None
    body = " + ".join(chosen)
    fn = _compile(f"lambda {params}: {body}", session)
    got = _try(session, "surrogate", fn, v, problem.xs, split)
    if got is None:
        return None
    wrong = [t for t, (g, w) in enumerate(zip(grads, got)) if not _matches(g, w, session)]
    if wrong:
        # the surrogate of forward gives a gradient to an input backward returns none for (a
        # threshold the spike compares with): the intended surrogate, stated unchecked
        dropped = [t for t in wrong if bool((grads[t] == 0).all())]
        return (body, [subject.labels[t] for t in dropped]) if dropped == wrong else None
    # one term for the one input with a gradient was spread already
    with_grad = [t for t, g in enumerate(grads) if not bool((g == 0).all())]
    if (len(chosen) > 1 or len(with_grad) > 1) and not spread.holds(session, "surrogate", fn):
        return None
    return body, []


def _agrees(session, fn, xs, split, want, t) -> bool:
    """Whether surrogate ``fn``'s gradient of input ``t`` at ``xs`` is ``want[t]``."""
    got = _try(session, "surrogate", fn, None, xs, split)
    return got is not None and _matches(want[t], got[t], session)


def _factor(c: float, numbers: list[tuple[str, float]]) -> str:
    for p, value in numbers:
        if value != 0 and abs(c + value) <= 1e-9 * abs(value):
            return f"-{p}"
        if value != 0 and abs(c - value) <= 1e-9 * abs(value):
            return p
    if abs(c + 1) <= 1e-9:
        return "-1"
    return f"{c:.6g}"


def _scaled(session, names, sigs, v, grads) -> str | None:
    """``intended=lambda x, alpha, grad: (-alpha * grad, None)`` for an identity forward, or
    ``surrogate=lambda x, s: c * Fn.forward(x, s)`` for a setup_context-style forward; None
    when neither reproduces backward."""
    scaled = [s for s in sigs.values() if s.kind == "scaled"]
    if len(scaled) != 1:
        return None
    sig = scaled[0]
    problem = session.problem
    split = problem.split(v)
    subject = session.subject
    params = ", ".join(names)
    top = subject.args.position(sig.t)
    others = [t for t in range(len(grads)) if t != sig.t and not bool((grads[t] == 0).all())]
    # the factor as an argument first, then as a literal where the argument was luck (-alpha
    # equals -1 at alpha = 1 for a backward that ignores alpha)
    for factor in dict.fromkeys([sig.factor or _factor(sig.scale, _numbers(session, names)),
                                 _factor(sig.scale, [])]):
        if sig.identity_forward and len(split) == 1 and not others and top is not None:
            grad = _grad_name(names)
            kind = "intended"
            sources = [f"lambda {params}, {grad}: {returned(names, {top: value})}"
                       for value in _scaled_values(session, names, factor, grad)]
        elif session.function_cls is not None and overrides(session.function_cls, "setup_context"):
            call = f"{session.function_cls.__name__}.forward({params})"
            kind, sources = "surrogate", [f"lambda {params}: {factor} * {call}"]
        else:
            return None
        for source in sources:
            fn = _compile(source, session)
            got = _try(session, kind, fn, v, problem.xs, split)
            if (got is not None and all(_matches(g, w, session) for g, w in zip(grads, got))
                    and _fresh_agree(session, kind, fn, v)
                    and moved_numbers.holds(session, names, factor if kind == "surrogate" else source.split(": ", 1)[1],
                                            lambda xs, want, fn=fn, kind=kind: _all_agree(
                                                session, kind, fn, xs, split, want), split)):
                return f"{kind}={source}"
    return None


def _scaled_values(session, names, factor: str, grad: str) -> list[str]:
    """``factor * grad``, then the same with ``grad`` first clipped to ``[-p, p]`` for each
    positive forward number ``p``: a gradient reversal that also clips what flows back (the
    domain-adversarial classifier of Multilingual_Text_to_Speech, corpus 13c dev: ``-l *
    grad.clamp(-c, c)``, which matched the plain ``-l * grad`` wherever the check's incoming
    gradient stayed inside ``c``)."""
    scale = "-" if factor == "-1" else f"{factor} * "
    clips = [f"{grad}.clamp(-{p}, {p})" for p, value in _numbers(session, names)
             if value > 0 and p != factor.lstrip("-")]
    return [f"{scale}{grad}"] + [f"{scale}{clip}" for clip in clips]


def _fresh_agree(session, kind, fn, v) -> bool:
    """Whether declaration ``fn`` also gives backward's gradients for a fresh incoming gradient
    four times the size of ``v``'s scale (a clip the check's own gradient never reached)."""
    w = 4 * torch.randn(v.shape, generator=rng.generator(43), dtype=torch.float64).to(v.dtype)
    try:
        want = session.problem.vjp(w)
    except Exception:  # noqa: BLE001 - user code: unverified, so not suggested
        return False
    got = _try(session, kind, fn, w, session.problem.xs, session.problem.split(w))
    return got is not None and all(_matches(g, x, session) for g, x in zip(want, got))


def _all_agree(session, kind, fn, xs, split, want) -> bool:
    """Whether declaration ``fn`` (``kind``) gives backward's gradients ``want`` at ``xs``."""
    got = _try(session, kind, fn, None, xs, split)
    return got is not None and all(_matches(g, w, session) for g, w in zip(want, got))


def _modification(session, names, sigs, v, grads) -> str | None:
    """``intended=lambda x, ..., grad: (<grad modified>, None)`` for an identity forward whose
    backward masks, centres, projects or clips the incoming gradient; None when no candidate
    reproduces backward."""
    modified = [s for s in sigs.values() if s.kind == "modified"]
    problem = session.problem
    split = problem.split(v)
    if len(modified) != 1 or len(split) != 1:
        return None
    sig = modified[0]
    subject = session.subject
    top = subject.args.position(sig.t)
    others = [t for t in range(len(grads)) if t != sig.t and not bool((grads[t] == 0).all())]
    if top is None or others or subject.args.inputs[sig.t].is_complex:
        return None
    grad = _grad_name(names)
    params = ", ".join(names)
    literal = literal_clip.candidates(grad, split[0], grads[sig.t]) if len(split) == 1 else []
    for body in _modifications(session, names, problem.xs[sig.t], grad) + literal:
        source = f"lambda {params}, {grad}: {returned(names, {top: body})}"
        got = _try(session, "intended", _compile(source, session), v, problem.xs, split)
        if got is not None and all(_matches(g, w, session) for g, w in zip(grads, got)):
            return f"intended={source}"
    return None


def returned(names: list[str], chosen: dict[int, str]) -> str:
    """Python source for what backward returns: ``chosen[i]`` for forward argument ``i``,
    ``None`` for the others; a bare value when forward takes one argument."""
    if len(names) == 1:
        return chosen.get(0, "None")
    return "(" + ", ".join(chosen.get(i, "None") for i in range(len(names))) + ")"


def _modifications(session, names, x, grad) -> list[str]:
    """Candidate modifications of ``grad``: clipped by a forward number (element by element
    or in norm), masked by the sign
    of a same-shaped argument, centred along a dim, or both (the projection onto the tangent
    space of a simplex face: the sparsemax Jacobian applied to the gradient)."""
    args = session.subject.args.values
    masks = [f"({names[i]} {op} 0)" for i, a in enumerate(args)
             if isinstance(a, torch.Tensor) and a.is_floating_point() and a.shape == x.shape
             for op in (">", "!=")]
    dims = list(range(-1, -min(x.dim(), 3) - 1, -1))
    m = next(n for n in ("m", "mask", "_m") if n not in names)
    out = [f"{grad}.clamp(-{p}, {p})" for p, value in _numbers(session, names) if value > 0]
    out += [f"{grad}.clamp(-1, 1)"]
    # its norm clipped to a forward number, per row along a dim or whole (bgflow's
    # _ClipGradient: grad * max_norm / max(|grad_row|, max_norm))
    out += [f"{grad} * ({p} / {grad}.norm({d}).clamp(min={p}))"
            for p, value in _numbers(session, names) if value > 0
            for d in [f"dim={d}, keepdim=True" for d in dims] + [""]]
    out += [f"{mask} * {grad}" for mask in masks]
    out += [f"{grad} - {grad}.mean({d}, keepdim=True)" for d in dims]
    out += [f"({m} := {mask}.to({grad}.dtype)) * ({grad} - ({m} * {grad}).sum({d}, "
            f"keepdim=True) / {m}.sum({d}, keepdim=True).clamp(min=1))"
            for mask in masks for d in dims]
    return out


def _home(session: Session) -> str | None:
    """The module of the Function under check (where its printed line is pasted)."""
    cls = session.function_cls
    return getattr(cls, "__module__", None) if cls is not None else None


# Shared with :mod:`gradsmith.checker.rerouting` (several outputs passing inputs through) and
# :mod:`gradsmith.checker.intended_fit` (one output).
matches, numbers, factor, modifications, compile_source, grad_name, simple_terms, flat = (
    _matches, _numbers, _factor, _modifications, _compile, _grad_name, _terms, _flat)


def moved_holds(session: Session, names: list[str], text: str, kind: str, fn: Any,
                split: list[torch.Tensor], inputs: Iterable[int] | None = None) -> bool:
    """Whether declaration ``fn`` (``kind``), whose printed source is ``text``, still gives
    backward's gradients (of ``inputs``, all when None) with each Python-number argument that
    ``text`` names moved (:mod:`gradsmith.checker.moved_numbers`): every declaration writer
    asks this before printing a line as checked, so no printed number is right only by luck
    (``2 * p`` that equals backward's literal 1 at the check's ``p = 0.5``)."""
    chosen = None if inputs is None else list(inputs)

    def agrees(xs, want) -> bool:
        got = _try(session, kind, fn, None, xs, split)
        ts = range(len(want)) if chosen is None else chosen
        return got is not None and all(_matches(want[t], got[t], session) for t in ts)

    return moved_numbers.holds(session, names, text, agrees, split)


def try_declaration(session: Session, kind: str, fn: Any, split: list[torch.Tensor]
                    ) -> list[torch.Tensor] | None:
    """The gradients declaration ``fn`` (``kind``: surrogate or intended) gives for the
    incoming gradients ``split``, or None when it raises or does not fit."""
    return _try(session, kind, fn, None, session.problem.xs, split)
