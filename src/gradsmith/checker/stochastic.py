"""Random backwards, judged on average: sampled gradient estimators (``unbiased=True``).

Some backwards draw random numbers on purpose: a sampling semiring's backward returns a one-hot
sample whose expectation is the softmax gradient, score-function and stochastic-rounding
estimators return a noisy draw whose mean is the gradient. One draw is the gradient of nothing,
so comparing it with finite differences can only fail. There are two honest ways to verify
such a backward, and gradsmith offers both:

- **draw for draw**: ``intended=h`` where ``h`` draws the same random numbers as backward;
  ``h`` is evaluated from backward's replayed random state (:mod:`gradsmith.checker.declared`)
  and compared exactly. Right when the draws themselves are the contract (a sampler).
- **on average** (this module): ``unbiased=True`` declares that the *mean* of backward's draws
  is the gradient: of forward (compared with finite differences), of the declared
  ``surrogate=``, or what a deterministic ``intended=`` returns. :data:`DRAWS` draws of
  ``J^T v`` (each backward from its own replayed random state ``backward_seed + 1 + k``) are
  averaged and judged against that reference projected on :data:`DIRECTIONS` random +-1
  directions ``u``: ``|mean<d, u> - <ref, u>| <= Z * se + atol + rtol * <|ref|, |u|>``, the
  standard error ``se`` measured from the draws themselves (projections pool many elements,
  so it is never 0 by chance). With ``Z = 5`` a right estimator fails with probability about
  1e-5; a bias larger than ``5 se / sqrt(n)`` per element is caught. Draws are seeded, so the
  verdict is reproducible.

Without a declaration, :func:`signature` tells the gradients check what a failing random
backward is (:mod:`gradsmith.checker.estimators`): unbiased (its mean over the draws is the
gradient: declare ``unbiased=True``) or not (a sampler, or fresh noise by mistake), and
:func:`estimator_finding` says so with the declaration line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from gradsmith.checker import numerics, rng, suggest
from gradsmith.checker.declared import DeclarationError
from gradsmith.checker.numerics import InputResult
from gradsmith.checker.problem import Problem
from gradsmith.checker.report import Finding
from gradsmith.checker.session import Session, backward_error

DRAWS = 256
DIRECTIONS = 16
Z = 5.0
PROBES = 8  # extra random states tried before a backward is called deterministic
MAX_ELEMENTS = 1024  # elements examined per input (a seeded sample beyond that)


@dataclass
class MeanResult:
    """One input's comparison of backward's mean draw with the reference."""

    t: int
    label: str
    random: bool  # the draws differ (else backward is deterministic for this input)
    ok: bool
    draws: int
    z: float = 0.0  # worst |mean - ref| / se over the directions
    # (flat index, mean of the draws, reference) at the worst elements, for messages/repro
    elements: list[list[float]] = field(default_factory=list)


def is_random(problem: Problem, v: torch.Tensor) -> bool:
    """Backward's ``J^T v`` changes with the random state at backward time, and only with it
    (a backward that differs under the same state is nondeterministic: the robustness check's
    finding, not an estimator)."""
    seed = problem.backward_seed or 0
    first = problem.vjp(v, seed + 1)
    if not all(_same(x, y) for x, y in zip(first, problem.vjp(v, seed + 1))):
        return False  # differs under the same state: nondeterminism, not random draws
    for k in range(2, 2 + PROBES):  # a sampler can draw the same sample twice by chance
        if not all(_same(x, y) for x, y in zip(first, problem.vjp(v, seed + k))):
            return True
    return False


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equal, NaN included (a NaN gradient is no sign of randomness)."""
    return a.shape == b.shape and bool(((a == b) | (a.isnan() & b.isnan())).all())


def examined(problem: Problem, t: int, session: Session) -> torch.Tensor:
    """Flat indices of input ``t`` compared on average: all, or a seeded sample."""
    n = problem.xs[t].numel()
    if n <= MAX_ELEMENTS:
        return torch.arange(n)
    gen = rng.generator(session.options.seed * 1000 + 29 + t)
    return torch.randperm(n, generator=gen)[:MAX_ELEMENTS].sort().values


def numerical_reference(session: Session, problem: Problem, v: torch.Tensor
                        ) -> list[torch.Tensor]:
    """Finite differences of ``v . f`` at the examined elements of every input."""
    V = v.to(torch.float64)
    h = session.settings.h
    refs = []
    for t in range(len(problem.xs)):
        cols = []
        for j in examined(problem, t, session).tolist():
            fp, fm = numerics.pair(problem, t, j, h)
            cols.append(float(V @ (fp - fm)) / (2 * numerics.step(problem, t, j, h)))
        refs.append(torch.tensor(cols, dtype=torch.float64))
    return refs


def mean_test(session: Session, problem: Problem, v: torch.Tensor,
              reference: list[torch.Tensor], full: bool = False) -> list[MeanResult]:
    """Judge the mean of :data:`DRAWS` backward draws of ``J^T v`` against ``reference``.

    Args:
        reference: per input, the reference at :func:`examined` elements (``full``: the whole
            flattened input).
    """
    seed = problem.backward_seed or 0
    idx = [examined(problem, t, session) for t in range(len(problem.xs))]
    rows: list[list[torch.Tensor]] = [[] for _ in problem.xs]
    for k in range(DRAWS):
        for t, g in enumerate(problem.vjp(v, seed + 1 + k)):
            rows[t].append(g.reshape(-1).to(torch.float64)[idx[t]])
    s = session.settings
    gen = rng.generator(session.options.seed * 1000 + 31)
    out = []
    for t, label in enumerate(problem.labels):
        D = torch.stack(rows[t])  # (draws, elements)
        ref = reference[t].reshape(-1).to(torch.float64)
        ref = ref[idx[t]] if full else ref
        random = not all(_same(row, D[0]) for row in D)
        U = torch.randint(0, 2, (DIRECTIONS, D.shape[1]), generator=gen).to(torch.float64) * 2 - 1
        P = D @ U.T  # (draws, directions)
        mean, se = P.mean(0), P.std(0) / math.sqrt(DRAWS)
        want = U @ ref
        tol = Z * se + s.atol + s.rtol * (U.abs() @ ref.abs())
        gap = (mean - want).abs()
        finite = bool(torch.isfinite(D).all())
        ok = finite and bool((gap <= tol).all())
        z = float((gap / se.clamp_min(1e-300)).max()) if random else 0.0
        m = D.mean(0)
        worst = (m - ref).abs().argsort(descending=True)[:20].tolist()
        elements = [[int(idx[t][j]), float(m[j]), float(ref[j])] for j in worst]
        out.append(MeanResult(t, label, random, ok, DRAWS, z, elements))
    return out


def on_average(session: Session, problem: Problem, reference, check: str,
               against: str = "finite differences of forward") -> list[Finding]:
    """``unbiased=True``: the mean of backward's draws against ``reference`` (``(xs, vs) ->
    gradients``; None: finite differences of forward). See the module docstring."""
    v = numerics.random_v(problem, 1, session.generator(1))[0]
    try:
        if reference is None:
            ref, full = numerical_reference(session, problem, v), False
        else:
            ref, full = reference(problem.xs, problem.split(v)), True
        results = mean_test(session, problem, v, ref, full)
    except DeclarationError:
        raise  # the surrogate or intended raised: the caller reports the declaration
    except Exception as exc:  # noqa: BLE001 - user code may raise anything
        raise backward_error(exc, check, session.function_cls) from None
    findings = []
    for r in results:
        if r.ok:
            continue
        findings.append(Finding(
            "biased-estimate", "error",
            describe_mean(problem, r, against) + ": declared unbiased=True, the "
            "mean of backward's random draws must be the gradient, and it is not",
            "make each draw an unbiased estimate (its expectation the gradient: check the "
            "sampling distribution and the scale), or declare what it is: intended= drawing "
            "the same random numbers (compared draw for draw)", check, r.label,
            {"mode": "mean", "draws": r.draws, "z": r.z, "elements": r.elements}))
    return findings


@dataclass
class RandomSignature:
    """What a failing random backward is: ``unbiased`` or ``biased``, per input."""

    kind: str
    results: list[MeanResult]


def signature(session: Session, problem: Problem, v: torch.Tensor) -> RandomSignature | None:
    """For a backward that failed the one-draw comparison: None when it is deterministic;
    else whether the mean of its draws is forward's gradient (finite differences)."""
    if not is_random(problem, v):
        return None
    results = mean_test(session, problem, v, numerical_reference(session, problem, v))
    kind = "unbiased" if all(r.ok for r in results) else "biased"
    return RandomSignature(kind, results)


def describe_mean(problem: Problem, r: MeanResult, against: str) -> str:
    """``the mean of 256 backward draws for x disagrees with ...``, naming the worst element."""
    j, mean, ref = r.elements[0] if r.elements else (0, math.nan, math.nan)
    return (f"the mean of {r.draws} backward draws for {r.label} disagrees with {against} "
            f"({r.z:.3g} standard errors off along a random direction; worst "
            f"{problem.element(r.t, int(j))}: mean {mean:.6g}, expected {ref:.6g})")


def estimator_finding(session: Session, problem: Problem, random: RandomSignature,
                      results: list[InputResult]) -> Finding:
    """A backward that draws random numbers: unbiased (declare ``unbiased=True``, verified by
    the very mean test the declaration runs) or not (a sampler: ``intended=`` draw for draw)."""
    failed = [res for res in results if res.failed]
    labels = ", ".join(res.label for res in failed)
    draws = random.results[0].draws
    if random.kind == "unbiased":
        kind = "sampled"
        pattern = (f"{labels}: backward draws random numbers at backward time (two random "
                   f"states give different gradients) and the mean of {draws} draws agrees "
                   f"with finite differences of forward (within {Z:g} standard "
                   "errors): a sampled gradient estimator, unbiased (a sampling semiring's "
                   "one-hot samples, score-function or stochastic-rounding estimators)")
        declaration = suggest.unbiased(session)
        how = f"declare it: `{declaration.line}` (checked: the mean of its draws is the gradient)"
        otherwise = ("compute the expectation in backward instead of drawing (the "
                     "probabilities instead of a sample)")
    else:
        kind = "random"
        worst = max((r for r in random.results if not r.ok), key=lambda r: r.z)
        pattern = (f"{labels}: backward draws random numbers at backward time, and "
                   f"{describe_mean(problem, worst, 'finite differences of forward')}"
                   ": its draws are samples (or an encoding of them), not an estimate of this "
                   "forward's gradient, or fresh noise by mistake")
        declaration = suggest.random_intended(session)
        how = f"declare it, completing: `{declaration.line}` ({declaration.note})"
        otherwise = ("draw the noise in forward, save it (ctx.save_for_backward) and reuse it "
                     "in backward; never draw random numbers in backward")
    message = (f"backward is not the gradient of forward, and looks like an estimator: "
               f"{pattern}. An intentional estimator must be declared, so that its backward "
               "is verified against what it is meant to compute; undeclared, it is unverified")
    elements = [[e.index, e.analytic, e.numerical] for e in failed[0].mismatches[:20]]
    return Finding(
        "undeclared-estimator", "error", message, f"if it is intended, {how}; if not, "
        f"{otherwise}", "gradients", failed[0].label,
        {"estimator": {res.label: kind for res in failed}, "scale": {},
         "declaration": declaration.line, "verified": declaration.verified,
         "draws": draws, "elements": elements,
         "mean": {r.label: r.elements[:5] for r in random.results}})
