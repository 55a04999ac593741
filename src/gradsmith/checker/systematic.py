"""A sharp second look at float32 checks: a wrong gradient that deviates the same way everywhere.

A check calibrated to float32 (inputs in float32, a Function computing in float32 inside
whatever it is handed, Triton kernels) compares element by element with ``rtol ~ 1e5 eps``
(1.2 %): a single element's central difference at ``h ~ 1e-2`` carries float32 rounding of
``eps |f| / h`` and the analytic side float32 rounding of its own. So a backward off by a factor
1.01 everywhere passed, while the same Function in float64 failed at 1.003.

Rounding and a wrong factor differ in two ways that one element cannot show but a direction
through all of them can:

- along ``u = sign(J^T v)`` (every element moved at once, the way its gradient points) a wrong
  factor adds up coherently, ``<g, u> = (1 + delta) sum |J^T v|``, while the elements' rounding
  errors have random signs and the forward's rounding (one evaluation of ``f``) does not grow
  with the number of elements: the directional difference quotient is far better conditioned
  than any single element's;
- a wrong factor is the same at every step, while truncation error changes with the step
  (Richardson extrapolation over ``h/2, h, 2h`` removes it to ``O(h^4)``) and a kink crossed by
  the step changes with it too, except one the direction meets right at its start (a ReLU input
  at 1e-4): that one shows as a gap between the one-sided derivatives that does not shrink with
  the step, and such a direction decides nothing. A kink met between the steps shows as gaps
  that do not double with the step: that direction decides nothing either.

An input is a ``gradient-mismatch`` when, along two directions (signs alone, then signs with
random magnitudes), the analytic/numerical ratio is off by more than ``1e4 eps`` (1.2e-3 in
float32; a correct float32 Function measured within 1e-5) and by more than 4x the forward's
rounding estimate, with the same sign, and the two Richardson estimates (from ``h/2, h`` and
``h, 2h``) agree on the deviation to 25 %. Elements that sit where kinks usually are (exact
zeros, ties) are not moved. TF32 products (:mod:`gradsmith.checker.tf32`) and user
tolerances are left alone; float64 checks need none of this (their element-wise rtol is 1e-3).
"""

from __future__ import annotations

import math

import torch

from gradsmith.checker import probe
from gradsmith.checker.numerics import RELATIVE_FROM, InputResult
from gradsmith.checker.problem import Problem
from gradsmith.checker.report import Finding
from gradsmith.checker.session import Session

#: Smallest relative deviation reported, in units of the check's machine epsilon.
THRESHOLD_EPS = 1e4
#: How far the two Richardson estimates may disagree on the deviation, relative to it.
CONSISTENT = 0.25


def applies(session: Session) -> bool:
    """Whether the check is float32-calibrated, with tolerances gradsmith chose, and no TF32."""
    s = session.settings
    return (s.eps == torch.finfo(torch.float32).eps and not s.user_tolerance
            and not session.cache.get("tf32"))


def deviations(session: Session, problem: Problem, results: list[InputResult],
               vs: list[torch.Tensor], grads: list[list[torch.Tensor]], check: str
               ) -> tuple[list[Finding], set[int]]:
    """``gradient-mismatch`` findings for inputs that passed the float32 comparison although
    their gradient deviates systematically, and the indices of those inputs."""
    if not applies(session) or not vs:
        return [], set()
    findings, flagged = [], set()
    gen = session.generator(53)
    for res in results:
        if res.failed or res.mismatches:
            continue
        found = _deviation(session, problem, res.t, vs[0], grads[0][res.t], gen)
        if found is None:
            continue
        flagged.add(res.t)
        findings.append(_finding(session, res.label, found, check))
    return findings, flagged


def _deviation(session: Session, problem: Problem, t: int, v: torch.Tensor, g: torch.Tensor,
               gen: torch.Generator) -> dict | None:
    """The deviation of input ``t`` (ratios, steps) where both directions show one, else None."""
    x = problem.xs[t]
    g64 = g.detach().to(torch.float64)
    if x.numel() == 0 or not bool(torch.isfinite(g64).all()) or not bool((g64 != 0).any()):
        return None
    smooth, _ = probe._kink_suspects(x)
    mask = torch.ones_like(g64) if smooth is None else smooth.to(torch.float64)
    # the step follows each element's scale (numerics.step), as the probes do
    scale = (x.detach().abs().to(torch.float64) / RELATIVE_FROM).clamp(min=1).nan_to_num(1.0)
    signs = torch.sign(g64) * mask * scale
    magnitudes = 0.5 + torch.rand(x.shape, generator=gen, dtype=torch.float64)
    f0 = problem.value().to(torch.float64)  # one forward at the inputs, for both directions
    first = _along(session, problem, t, v, g64, signs, f0)
    if first is None:
        return None
    second = _along(session, problem, t, v, g64, signs * magnitudes, f0)
    if second is None or math.copysign(1, second["delta"]) != math.copysign(1, first["delta"]):
        return None
    return {"directions": [first, second], "h": session.settings.h}


def _along(session: Session, problem: Problem, t: int, v: torch.Tensor, g64: torch.Tensor,
           u64: torch.Tensor, f0: torch.Tensor) -> dict | None:
    """Ratio analytic/numerical along ``u`` where it shows a systematic deviation, else None
    (``f0``: forward's outputs at the inputs, flattened, in float64)."""
    s = session.settings
    analytic = float((g64 * u64).sum())
    if analytic == 0 or not math.isfinite(analytic):
        return None
    x = problem.xs[t]
    u = u64.to(x.dtype)
    v64 = v.to(torch.float64)
    h = s.h
    d, gap = {}, {}
    for k in (0.5, 1.0, 2.0):
        d[k], gap[k] = _differences(problem, t, u, v64, k * h, float(v64 @ f0))
    rich = ((4 * d[0.5] - d[1.0]) / 3, (4 * d[1.0] - d[2.0]) / 3)
    if not all(math.isfinite(r) and r != 0 for r in rich):
        return None
    deltas = [analytic / r - 1 for r in rich]
    if _kink(gap, abs(analytic - rich[0])):
        return None
    noise = 10 * s.eps * float(v64.abs() @ f0.abs()) / h  # a gap's rounding at step h
    if not _quadratic(gap, noise):
        return None
    rounding = 10 * s.eps * float((v64.abs() * f0.abs()).sum()) / (h / 2) / abs(rich[0])
    least = max(THRESHOLD_EPS * s.eps, 4 * rounding)
    same_sign = deltas[0] * deltas[1] > 0
    if not (same_sign and min(abs(dl) for dl in deltas) > least
            and abs(deltas[0] - deltas[1]) <= CONSISTENT * max(abs(dl) for dl in deltas)):
        return None
    return {"analytic": analytic, "numerical": rich[1], "ratio": 1 + deltas[1],
            "delta": deltas[1], "deltas": deltas, "least": least}


def _differences(problem: Problem, t: int, u: torch.Tensor, v64: torch.Tensor, k: float,
                 f0v: float) -> tuple[float, float]:
    """Central difference ``v^T (f(x+ku) - f(x-ku)) / 2k`` and the one-sided gap
    ``v^T (f(x+ku) - 2 f(x) + f(x-ku)) / k`` along ``u``."""
    fp = float(v64 @ problem.shifted(t, k * u).to(torch.float64))
    fm = float(v64 @ problem.shifted(t, -k * u).to(torch.float64))
    return (fp - fm) / (2 * k), (fp - 2 * f0v + fm) / k


def _kink(gap: dict[float, float], deviation: float) -> bool:
    """Whether an element sits on a kink the direction crosses: the gap between one-sided
    derivatives shrinks with the step on a smooth function (``k u^T H u``) but stays at the
    slope's jump on a kink, whose central differences are then off by half of it at every
    step, as consistently as a wrong factor. A gap below half the deviation (rounding on a
    linear function) says nothing."""
    steady = abs(gap[0.5]) > 0.75 * abs(gap[1.0]) or abs(gap[1.0]) > 0.75 * abs(gap[2.0])
    return steady and abs(gap[0.5]) >= 0.5 * deviation


def _quadratic(gap: dict[float, float], noise: float) -> bool:
    """Whether the one-sided gaps grow with the step as on a smooth function (``k u^T H u``:
    doubling the step doubles the gap), which Richardson's extrapolation assumes. A kink met
    between two steps (a top-k selection changing, float32's steps being 1e4 times float64's)
    makes the gap jump instead (0.05, 2.1, 10 at steps 0.005, 0.01, 0.02), and the two
    Richardson estimates, both made from the crossed steps, could agree on a deviation that is
    the kink's. ``noise``: a gap's rounding at step ``h`` (it scales as 1 / step)."""
    for k in (0.5, 1.0):
        small, large = gap[k], gap[2 * k]
        slack = 0.5 * max(2 * abs(small), abs(large)) + noise / k + noise / (2 * k)
        if abs(large - 2 * small) > slack:
            return False
    return True


def _finding(session: Session, label: str, found: dict, check: str) -> Finding:
    first, second = found["directions"]
    h = found["h"]
    return Finding(
        "gradient-mismatch", "error",
        f"gradient of {label} is off by a factor of about {first['ratio']:.5g} (analytic/"
        f"numerical along the gradient's own signs; {second['ratio']:.5g} along signs with "
        f"random magnitudes), the same at steps {h / 2:.2g} to {2 * h:.2g} (Richardson "
        "estimates agree): within float32's element-wise tolerance "
        f"(rtol={session.settings.rtol:.2g}), but float32 rounding neither adds up along a "
        "direction through every element nor stays the same when the step changes, a wrong "
        f"gradient does (deviations above {first['least']:.2g} are reported)",
        "re-derive backward for this input: a constant or a scale missing or extra (a "
        "temperature, 1/n of a mean, a smoothing factor) is off by the same ratio everywhere",
        check, label, {"mode": "systematic", "ratio": first["ratio"],
                       "ratios": [first["ratio"], second["ratio"]],
                       "analytic": first["analytic"], "numerical": first["numerical"],
                       "least": first["least"], "h": h})
