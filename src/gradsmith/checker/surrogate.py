"""Point 9: an intentional gradient is verified against its declaration: the autograd gradient
of a ``surrogate=`` (straight-through estimators) or the gradients an ``intended=`` function
returns (clipping, sparsification, noise, scaling, reversal). See
:mod:`gradsmith.checker.declared`."""

from __future__ import annotations

import torch

from gradsmith.checker import binary_domain, declared, gradients, spread, stochastic
from gradsmith.checker.numerics import Settings, step_scale
from gradsmith.checker.problem import Problem, index_str
from gradsmith.checker.report import Finding
from gradsmith.checker.session import Session, Skip, backward_error

NAME = "surrogate"


def run(session: Session) -> list[Finding]:
    kind = declared.declared_kind(session)
    if kind is None:
        raise Skip("no surrogate= or intended= declared")
    subject = session.subject
    mine = session.problem
    gate = binary_domain.applies(session, mine) is not None  # declared on 0/1 values only
    if gate:
        mine = binary_domain.binary_problem(session, mine)
    mine.linearize()
    if session.options.unbiased:
        if declared.uses_rng(session):
            return [_error(kind, f"unbiased=True compares the mean of backward's draws "
                           f"with the declared {kind}, which then must not draw random "
                           "numbers itself (a random declaration is compared draw for draw: "
                           "drop unbiased=True)", session)]
        against = {"surrogate": "the surrogate's gradient",
                   "intended": "the declared intended gradient"}[kind]
        try:
            return stochastic.on_average(session, mine, declared.reference(session), NAME,
                                         against)
        except declared.DeclarationError as err:
            return [_error(kind, str(err), session)]
    gen = session.generator(17)
    s = session.settings
    ref = declared.reference(session)
    findings: list[Finding] = []
    seen: list[list[torch.Tensor]] = []
    for _ in range(2):
        v = torch.randn(mine.m, generator=gen, dtype=torch.float64).to(mine.xs[0].dtype)
        try:
            got = mine.vjp(v)  # from backward's replayed random state, as intended=
        except Exception as exc:  # noqa: BLE001 - user code
            return [backward_error(exc, NAME, session.function_cls).finding]
        try:
            want = ref(mine.xs, mine.split(v))
        except declared.DeclarationError as err:
            return [_error(kind, str(err), session)]
        seen += [got, want]
        for t, (a, b) in enumerate(zip(got, want)):
            bad = ((a - b).abs() > s.atol + s.rtol * b.abs()) | (a.isnan() != b.isnan())
            if bad.any():
                findings.append(_mismatch(kind, subject.labels[t], mine.xs[t], a, b, bad,
                                          t in mine.complex_inputs))
        if findings:
            break
    if not findings and not gate:  # a gate's inputs are 0/1: nothing to spread
        findings = _spread(session, kind)
    if not findings and kind == "surrogate":
        findings = _shift(session)
    vacuous = [] if findings else gradients.not_exercised(seen, [], NAME)
    if vacuous and _forward_changes(mine, s, session.generator(19)):
        return []  # a declared 0 where forward moves (stop-gradient): compared, not vacuous
    return findings or vacuous


def _shift(session: Session) -> list[Finding]:
    """A surrogate that matched, while backward ignores a number that shifts forward's step
    (:mod:`gradsmith.checker.shifted_step`): matching at the example's offset hides it."""
    from gradsmith.checker import shifted_step, suggest  # suggest builds on this check's kin

    text = shifted_step.ignored(session, suggest.names(session))
    if text is None:
        return []
    return [Finding("estimator-ignores-shift", "error", text,
                    "compute backward's window from the input minus that number",
                    NAME, None)]


def _spread(session: Session, kind: str) -> list[Finding]:
    """The declaration against backward with each element-wise input spread over a grid of
    values (:mod:`gradsmith.checker.spread`): a window, threshold or slope that differs
    where the given inputs have no element still fails."""
    fn = session.surrogate if kind == "surrogate" else session.intended
    off = spread.disagreement(session, kind, fn)
    if off is None:
        return []
    mine = session.problem
    label = mine.labels[off.t]
    found = _mismatch(kind, label, off.xs[off.t], off.got, off.want,
                      spread.bad(off.got, off.want, session), off.t in mine.complex_inputs)
    found.message += (f" (with {mine.labels[off.spread]} filled with values spread from "
                      "-1000 to 1000, the other arguments as given; at the given inputs "
                      "they agree: the difference lies where no given element falls)")
    return [found]


def _forward_changes(problem: Problem, s: Settings, gen: torch.Generator) -> bool:
    """Whether forward moves along a random direction (every input at once) the way a
    differentiable function does: the difference quotients at steps ``h`` and ``h / 2`` agree
    and exceed ``atol`` somewhere. Backward and declaration both 0 verify nothing only where
    forward is constant (an empty window); where it changes, a declared 0 (stop-gradient) is
    what a backward passing the gradient through would fail. A step crossed by chance (the
    quotient doubles when ``h`` halves) or a NaN does not count as a change."""
    us = [torch.randn(x.shape, generator=gen, dtype=torch.float64)
          * step_scale(float(x.abs().max()) if x.numel() else 0.0) for x in problem.xs]

    def quotient(h: float) -> torch.Tensor:
        moved = [[x + (sign * h * u).to(x.dtype) for x, u in zip(problem.xs, us)]
                 for sign in (1, -1)]
        fresh = frozenset(range(len(problem.xs)))
        fp, fm = (problem.value(m, fresh).to(torch.float64) for m in moved)
        return (fp - fm) / (2 * h)

    q1, q2 = quotient(s.h), quotient(s.h / 2)
    return (bool(torch.isfinite(q1).all()) and bool((q1.abs() > s.atol).any())
            and torch.allclose(q1, q2, rtol=0.1, atol=s.atol))


def _error(kind: str, text: str, session: Session) -> Finding:
    fn = session.surrogate if kind == "surrogate" else session.intended
    text = f"the {kind}= declared at {declared.describe(fn)} cannot be used: {text}"
    if kind == "surrogate":
        return Finding("surrogate-error", "error", text,
                       "give a differentiable function with the Function's signature, "
                       "returning outputs shaped like the Function's", NAME)
    return Finding("intended-error", "error", text,
                   "give a function of (*forward arguments, *grad_outputs) returning one "
                   "gradient per forward argument, like backward (None where there is none)",
                   NAME)


def _mismatch(kind: str, label: str, x: torch.Tensor, a: torch.Tensor, b: torch.Tensor,
              bad: torch.Tensor, real_view: bool = False) -> Finding:
    idx = torch.nonzero(bad.reshape(-1)).reshape(-1)
    j = int(idx[0])
    what = "the surrogate's gradient" if kind == "surrogate" else "the intended gradient"
    msg = (f"backward for {label} differs from {what} at {len(idx)} of {x.numel()} elements; "
           f"first {label}{index_str(j, x.shape, real_view)}: backward "
           f"{float(a.reshape(-1)[j]):.6g}, "
           f"{kind} {float(b.reshape(-1)[j]):.6g}")
    if kind == "surrogate":
        return Finding(
            "surrogate-mismatch", "error", msg,
            "make backward implement the surrogate's derivative (e.g. the clipped identity "
            "of a straight-through estimator), or fix the surrogate", NAME, label,
            {"elements": idx[:20].tolist()})
    return Finding(
        "intended-mismatch", "error", msg,
        "make backward return what the declared intended= function returns for the same "
        "arguments and grad_outputs (same random state for noise), or fix the declaration",
        NAME, label, {"elements": idx[:20].tolist()})
