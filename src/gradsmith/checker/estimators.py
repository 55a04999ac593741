"""Undeclared estimators: a backward that is deliberately not the forward's gradient.

Straight-through estimators, gradient reversal and gradient scaling are everywhere in real
code (quantization, binary networks, domain adaptation) and are never the gradient of their
forward. Without a declaration they fail the gradients check like any bug; what a user needs
to hear is *what it looks like* and *how to declare it*. The signatures, read from the
per-element comparison the gradients check already made:

- **straight-through**: finite differences are exactly 0 (the forward is piecewise constant:
  round, sign, floor, quantize) wherever backward disagrees, and backward is not 0 there.
  Flat at every element: a straight-through estimator; flat at some (a clamp, a saturation)
  with backward passing the gradient through: a straight-through clamp, or a forgotten mask.
- **scaled**: an identity forward (``x.view_as(x)``, ``x.clone()``) whose backward is c x the
  true gradient with one constant c != 1 for every element: c = -1 gradient reversal, c < 0
  reversal with a coefficient, c > 0 gradient scaling. (A constant factor on any other
  forward's gradient is far more often a wrong formula, 2 e^x for e^x: a gradient-mismatch.)
- **modified / rerouted**: an identity forward (with several outputs: each output matched to
  the input it passes through) whose backward returns something else: a clip, a mask, or
  another output's gradient handed or folded in (:mod:`gradsmith.checker.rerouting`).

The finding keeps the Function failing (undeclared, it is unverified) under its own code,
names the pattern, and gives the declaration line for this Function (see
:mod:`gradsmith.checker.suggest`), verified against its backward whenever possible.
"""

from __future__ import annotations

import torch

from gradsmith.checker import (
    crossed,
    half_flat,
    ignored_cotangent,
    ignored_outputs,
    learned_quant,
    numerics,
    quantized,
    redrawn,
    relaxed_abs,
    reported,
    rerouting,
    rescaled,
    rng,
    stochastic,
    substituted,
    suggest,
    truncated,
    unresolved_solve,
)
from gradsmith.checker.deploy._common import forward_is_random
from gradsmith.checker.estimator_signature import Signature, describe
from gradsmith.checker.numerics import InputResult
from gradsmith.checker.problem import Problem
from gradsmith.checker.report import Finding
from gradsmith.checker.session import Session

NAME = "gradients"
SAMPLE = 64  # elements examined per input in probe mode (plus the located culprits)
KINDS = ("straight-through", "straight-through-saturating", "straight-through-rescaled",
         "scaled", "modified", "no-gradient",
         "sampled", "random", "guided", "quantized", "substituted", "learned-quantizer",
         "ignored-output", "truncated", "relaxed-abs")


def detect(session: Session, problem: Problem, results: list[InputResult]
           ) -> tuple[list[Finding], set[int]]:
    """Estimator findings, and the inputs whose gradient-mismatch findings they replace."""
    cached = session.cache.get("vjp:gradients")
    if cached is None:
        return [], set()
    vs, grads = cached
    if not any(res.failed for res in results):
        return [], set()
    random = stochastic.signature(session, problem, vs[0])
    # A biased random backward under a random forward is the classic bug (dropout's mask
    # redrawn in backward): the randomness check names it, the gradients stay a mismatch.
    if random is not None and (random.kind == "unbiased" or not forward_is_random(session)):
        return [stochastic.estimator_finding(session, problem, random, results)], {
            res.t for res in results}
    # a learned step, offset or clip; outputs whose gradient backward drops: one surrogate
    # covers every input
    learned = (learned_quant.fit(session, problem, results, vs[0], grads[0])
               or ignored_outputs.fit(session, problem, results, vs[0], grads[0]))
    if learned is not None:
        sigs, declaration = learned
        declaration = _pasteable(session, declaration)
        return [_with_elements(_finding(sigs, declaration, []), results)], set(sigs)
    sigs: dict[int, Signature] = {}
    for res in results:
        if not res.failed or res.nan_analytic:
            continue
        a, n, tol, idx, out = _elements(session, problem, res, vs[0], grads[0][res.t])
        identity = out is not None  # forward passes this input through unchanged
        sig = (_classify(res, a, n, tol, identity)
               or _guided(problem, res, vs[0], a, n, tol, idx)
               or (None if identity else rescaled.signature(session, problem, res.t,
                                                            res.label, a, idx))
               or _quantized(session, res, identity)
               or _substituted(session, res, vs[0], a, tol, idx, identity)
               or _relaxed(session, res, vs[0], a, tol, idx, identity))
        if sig is None and identity:
            sig = _scaled_by_argument(session, res, a, n, tol, idx) or _modified(res, a, n, tol)
        if sig is not None:
            if out is not None:
                sig.output = out
                if len(problem.out_shapes) > 1:
                    sig.through = session.subject.out_labels[out]
            sigs[res.t] = sig
    if not any(sig.kind != "no-gradient" for sig in sigs.values()):
        # a backward cut short after a count of iterations: right in the limit
        cut = truncated.fit(session, problem, results) if not sigs else None
        if cut is None:
            return [], set()
        sigs, declaration = cut
        return [_with_elements(_finding(sigs, declaration, []), results)], set(sigs)
    # an iterative solve that no step resolves (collapsed off its domain): unchecked, not an
    # estimator
    unresolved = unresolved_solve.finding(session, problem, results, sigs, NAME)
    if unresolved is not None:  # an input backward gives no gradient keeps its mismatch
        return [unresolved], {t for t, s in sigs.items() if s.kind == "straight-through"}
    declaration = _pasteable(session, _declaration(session, problem, sigs, vs[0], grads[0]))
    others = [res.label for res in results if res.failed and res.t not in sigs]
    finding = _finding(sigs, declaration, others)
    if not finding.details["verified"]:  # `torch.ones(grad_output.shape)`: say the harm
        ignored_cotangent.name_harm(finding, results, vs, grads)
    return [_with_elements(finding, results)], set(sigs)


def _with_elements(finding: Finding, results: list[InputResult]) -> Finding:
    """The finding with the elements behind it (the first estimator input's), for --repro's
    numeric replay."""
    main = next(res for res in results if res.label == finding.input)
    finding.details["elements"] = [[e.index, e.analytic, e.numerical]
                                   for e in main.mismatches[:20]]
    return finding


def _declaration(session, problem, sigs, v, g) -> suggest.Declaration:
    """The declaration line for ``sigs``; a stand-in, not fitted, where an earlier input set
    already reported this estimator (the finding is dropped at the merge: :mod:`reported`)."""
    main = next(s for s in sigs.values() if s.kind != "no-gradient")
    if reported.known("undeclared-estimator", main.label):
        return suggest.Declaration("(the first input set's)", False,
                                   "already reported on an earlier input set")
    if all(s.kind in ("quantized", "no-gradient") for s in sigs.values()):
        return quantized.declaration(session)
    return (rerouting.declaration(session, problem, sigs, v, g)
            or suggest.declaration(session, problem, sigs, v, g))


def _pasteable(session, declaration: suggest.Declaration) -> suggest.Declaration:
    """``declaration``, no longer called checked where it fails with the arguments its line
    draws afresh (:mod:`gradsmith.checker.redrawn`)."""
    if not declaration.verified or redrawn.holds(session, declaration.line):
        return declaration
    return suggest.Declaration(
        declaration.line, False,
        "it matches backward at the check's values, not with the tensors this line draws by "
        "torch.randn drawn afresh: write in the example the values your code passes, or a "
        "declaration that reads them from its arguments")


def _elements(session, problem, res, v, g):
    """(analytic, numerical, tolerance, flat index) per examined element, kinks left out, and
    the output that passes the input through unchanged (None: forward is no identity in it)."""
    x = problem.xs[res.t]
    kinks = {e.index for e in res.kinks}
    if res.projection is not None:
        a, n, tol = res.projection
        idx = torch.tensor([j for j in range(x.numel()) if j not in kinks], dtype=torch.long)
    else:
        gen = rng.generator(x.numel())
        sample = torch.randperm(x.numel(), generator=gen)[:SAMPLE].tolist()
        picks = list(dict.fromkeys([e.index for e in res.mismatches] + sample))
        idx = torch.tensor([j for j in picks if j not in kinks], dtype=torch.long)
        V = v.to(torch.float64)
        cols, scales = [], []
        for j in idx.tolist():
            fp, fm = numerics.pair(problem, res.t, j, session.settings.h)
            hj = numerics.step(problem, res.t, j, session.settings.h)
            cols.append(float(V @ (fp - fm)) / (2 * hj))
            scales.append(float(V.abs() @ (fp - fm).abs()) / (2 * hj))
        a = torch.zeros(x.numel(), dtype=torch.float64)
        n, tol = a.clone(), a.clone()
        a[idx] = g.reshape(-1)[idx].to(torch.float64)
        n[idx] = torch.tensor(cols, dtype=torch.float64)
        tol[idx] = session.settings.atol + session.settings.rtol * torch.tensor(
            scales, dtype=torch.float64)
    a, n, tol = (t.to(torch.float64)[idx] for t in (a, n, tol))
    wide = half_flat.float64_differences(problem, res.t, idx, v, 1e-6)
    if wide is not None and bool((wide == 0).any()):  # bfloat16 code: flat at a float64 step
        n = wide
    keep = torch.isfinite(a) & torch.isfinite(n)
    a, n, tol, idx = crossed.without_jumps(problem, res.t, v, a[keep], n[keep], tol[keep],
                                           idx[keep], session.settings)
    return a, n, tol, idx, _passed_through(problem, v, x, n, tol, idx)


def _passed_through(problem, v, x, n, tol, idx) -> int | None:
    """The index of the output that passes this input through unchanged (finite differences
    equal to that output's part of ``v``: what an identity forward's gradient is), or None.
    With several outputs, each same-sized one is tried (a pass-through may be any of them)."""
    for k, piece in enumerate(problem.split(v)):
        if piece.numel() == x.numel() and bool(
                ((n - piece.reshape(-1).to(torch.float64)[idx]).abs() <= tol).all()):
            return k
    return None


def _classify(res, a, n, tol, identity: bool) -> Signature | None:
    if a.numel() == 0:
        return None
    wrong = (a - n).abs() > tol
    if not bool(wrong.any()):
        return None
    big = float(a.abs().max())
    flat = n.abs() <= 1e-12 + 1e-9 * big
    label, total = res.label, a.numel()
    if bool((a.abs() <= tol).all()):
        return Signature(res.t, label, "no-gradient", total=total)
    if bool((flat | ~wrong).all()) and bool((a[wrong & flat] != 0).all()):
        kind = "straight-through" if bool(flat.all()) else "straight-through-saturating"
        return Signature(res.t, label, kind, int(flat.sum()), total)
    nn = float((n * n).sum())
    # A ratio needs several elements to be a pattern: one number always has one.
    if int((n.abs() > tol).sum()) >= 2:
        c = float((a * n).sum()) / nn
        fits = bool(((a - c * n).abs() <= tol + 1e-9 * (c * n).abs()).all())
        # Only with an identity forward (x.view_as(x), x.clone()): a constant factor on any
        # other forward's gradient is far more often a wrong formula (2 e^x for e^x).
        if fits and identity and abs(c - 1) > 1e-3 and abs(c) > 1e-6:
            return Signature(res.t, label, "scaled", total=total, scale=c,
                             identity_forward=True)
    return None


def _guided(problem, res, v, a, n, tol, idx) -> Signature | None:
    """An element-wise forward whose backward is its gradient with the negative incoming
    gradients zeroed (``a = n * [v > 0]``, wrong somewhere): guided backpropagation's ReLU,
    a saliency method's deliberate rule, not a slip (a slip zeroing exactly the elements whose
    incoming gradient is negative is unheard of)."""
    pieces = [p for p in problem.split(v) if p.numel() == problem.xs[res.t].numel()]
    if len(pieces) != 1 or a.numel() == 0:
        return None
    up = pieces[0].reshape(-1).to(torch.float64)[idx]
    guided = n * (up > 0)
    if not bool(((a - guided).abs() <= tol).all()) or not bool(((a - n).abs() > tol).any()):
        return None
    return Signature(res.t, res.label, "guided", total=a.numel())


def _quantized(session, res, identity: bool) -> Signature | None:
    """Forward's derivative rounded to a grid (:mod:`gradsmith.checker.quantized`)."""
    found = None if identity else quantized.signature(session, res.t)
    if found is None:
        return None
    step, levels = found
    return Signature(res.t, res.label, "quantized", total=levels, step=step, levels=levels)


def _substituted(session, res, v, a, tol, idx, identity: bool) -> Signature | None:
    """Forward's gradient with one argument in place of another
    (:mod:`gradsmith.checker.substituted`)."""
    found = None if identity else substituted.signature(session, res, v, a, tol, idx)
    if found is None:
        return None
    names = suggest.names(session)
    return Signature(res.t, res.label, "substituted", total=a.numel(),
                     swap=(session.subject.labels[found[0]], names[found[1]]))


def _relaxed(session, res, v, a, tol, idx, identity: bool) -> Signature | None:
    """Forward's gradient with each ``|d|`` relaxed, AdderNet's
    (:mod:`gradsmith.checker.relaxed_abs`)."""
    found = None if identity else relaxed_abs.signature(session, res, v, a, tol, idx)
    if found is None:
        return None
    return Signature(res.t, res.label, "relaxed-abs", total=a.numel(), scale=found[1],
                     factor=found[0])


def _scaled_by_argument(session, res, a, n, tol, idx) -> Signature | None:
    """An identity forward whose backward multiplies by another tensor argument, element by
    element (``-alpha_ * grad`` with ``alpha_`` a tensor): reversal or scaling by it."""
    if int((n.abs() > tol).sum()) < 2:
        return None
    args = session.subject.args
    x = session.problem.xs[res.t]
    names = suggest.names(session)
    for i, value in enumerate(args.values):
        if (not isinstance(value, torch.Tensor) or not value.is_floating_point()
                or value.dim() == 0 or i == args.position(res.t)):
            continue
        try:
            factor = value.detach().to(torch.float64).expand(x.shape).reshape(-1)[idx]
        except RuntimeError:
            continue
        for sign, prefix in ((-1.0, "-"), (1.0, "")):
            if bool(((a - sign * factor * n).abs() <= tol + 1e-9 * (factor * n).abs()).all()):
                return Signature(res.t, res.label, "scaled", total=a.numel(),
                                 scale=sign * float(factor.mean()), identity_forward=True,
                                 factor=f"{prefix}{names[i]}")
    return None


def _modified(res, a, n, tol) -> Signature | None:
    """An identity forward (finite differences equal grad_output) whose backward returns
    something else that is no constant multiple of it: an intended modification of the
    gradient (a projection, a mask, a clip), which no forward's gradient can be."""
    if not bool(((a - n).abs() > tol).any()):
        return None
    return Signature(res.t, res.label, "modified", total=a.numel(), identity_forward=True)


def _finding(sigs: dict[int, Signature], declaration: suggest.Declaration,
             others: list[str]) -> Finding:
    estimators = [s for s in sigs.values() if s.kind != "no-gradient"]
    main = estimators[0]
    patterns = "; ".join(describe(s) for s in sigs.values())
    message = (f"backward is not the gradient of forward, and looks like an estimator: "
               f"{patterns}. An intentional estimator must be declared, so that its backward "
               "is verified against what it is meant to compute; undeclared, it is unverified")
    if others:
        message += (f". The gradient of {', '.join(others)} disagrees too (reported "
                    "separately); if it belongs to the estimator (as a learned quantization "
                    "scale's does), the declaration covers it")
    # An argument written as `...` (no source for it: a module, an object) makes the line a
    # template: it cannot pass as printed, so it is never called checked.
    placeholder = suggest.has_placeholder(declaration.line)
    if declaration.verified and not placeholder:
        how = (f"declare it: `{declaration.line}` (checked: "
               f"{declaration.note or 'this backward matches it'})")
    elif declaration.verified:
        how = (f"declare it, completing the `...` in its example (an argument gradsmith "
               f"cannot write as source; the rest was checked: "
               f"{declaration.note or 'this backward matches it'}): `{declaration.line}`")
    elif declaration.note.startswith("not checked"):  # complete, but backward disagrees
        how = f"declare it: `{declaration.line}` ({declaration.note})"
    else:
        how = f"declare it, completing: `{declaration.line}` ({declaration.note})"
    if main.kind == "scaled":
        otherwise = "remove the factor from backward"
    elif main.kind == "modified" and main.through is not None:
        otherwise = ("the backward of a pass-through returns each output's gradient, "
                     "unchanged, to the input it passes through")
    elif main.kind == "modified":
        otherwise = "the backward of an identity returns grad_output unchanged"
    elif main.kind == "quantized":
        otherwise = "return the derivative at full precision (save what computes it exactly)"
    elif main.kind == "substituted":
        otherwise = "compute the gradient with the argument forward uses"
    elif main.kind == "truncated":
        otherwise = (f"backward must be the gradient of what forward returns at any "
                     f"{main.factor}: differentiate the returned value, not the iteration")
    elif main.kind == "relaxed-abs":
        otherwise = "use sign(d) where forward has |d| (the derivative of abs), unscaled"
    elif main.kind == "guided":
        otherwise = "pass negative incoming gradients through as well (drop the grad > 0 mask)"
    else:
        otherwise = ("backward must be 0 where forward is flat: multiply grad_output by the "
                     "mask of the region where forward changes, or re-derive backward")
    return Finding(
        "undeclared-estimator", "error", message,
        f"if it is intended, {how}; if not, {otherwise}", NAME, main.label,
        {"estimator": {s.label: s.kind for s in sigs.values()},
         "scale": {s.label: s.scale for s in sigs.values() if s.kind == "scaled"},
         "declaration": declaration.line,
         "verified": declaration.verified and not placeholder})
