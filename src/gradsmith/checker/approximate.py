"""Point 10: gradients that are approximate by design (wrappers of external solvers,
Monte-Carlo or finite-difference backwards) are measured, then judged against thresholds.

Per input: relative error ``|g - g_num| / |g_num|`` and cosine similarity of the backward's
``J^T v`` with the numerical one, placed in quality bands. The verdict: pass when the relative
error is at most ``max_relative_error`` (default 1e-2) and the cosine at least ``min_cosine``
(default 0.99), the accuracy the tutorials advise for training; a gradient 21% off fails.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from gradsmith._errors import GradsmithError
from gradsmith.checker import gradients, numerics, probe
from gradsmith.checker.report import Finding
from gradsmith.checker.session import Options, Session, Skip

NAME = "approximate"
BANDS = ((1e-6, "exact"), (1e-3, "excellent"), (1e-2, "good"), (1e-1, "fair"), (0.5, "poor"))


def configure(opts: Options, options: dict[str, Any]) -> None:
    """Read ``max_relative_error`` / ``min_cosine`` (the verdict's thresholds) into ``opts``.

    Raises:
        GradsmithError: for a value out of range, or a threshold without ``approximate=True``.
    """
    for key, low, high in (("max_relative_error", 0.0, float("inf")), ("min_cosine", -1.0, 1.0)):
        if key not in options:
            continue
        value = options[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
                low <= value <= high):
            raise GradsmithError(f"check: {key} must be a number in [{low:g}, {high:g}], got "
                                 f"{value!r}")
        if not opts.approximate:
            raise GradsmithError(f"check: {key}={value!r} only applies with approximate=True; "
                                 "add approximate=True or drop it")
        setattr(opts, key, float(value))


def band(rel: float) -> str:
    """Quality band of a relative error.

    Example:
        >>> band(0.005)
        'good'
    """
    for limit, name in BANDS:
        if rel <= limit:
            return name
    return "unusable"


def run(session: Session) -> list[Finding]:
    if not session.options.approximate:
        raise Skip("approximate=False (exact gradients are judged by the gradients check)")
    problem = session.problem
    gen = session.generator(19)
    v = numerics.random_v(problem, 1, gen)[0]
    g = gradients.analytic(problem, [v], NAME)[0]
    findings = []
    for t, x in enumerate(problem.xs):
        a = g[t].reshape(-1).to(torch.float64)
        if x.numel() <= session.options.exact_max:
            num = torch.stack([(v.to(torch.float64) * numerics.column(
                problem, t, j, session.settings.h)).sum() for j in range(x.numel())])
            rel = float((a - num).norm() / num.norm().clamp_min(1e-300))
            cos = float(torch.nn.functional.cosine_similarity(a, num, dim=0))
            how = "all elements"
        else:
            rel, cos = _probed(problem, t, g[t], v, session, gen)
            how = "estimated from 8 random-direction probes"
        label = problem.labels[t]
        findings.append(_verdict(label, rel, cos, how, session.options))
    return findings


def _verdict(label: str, rel: float, cos: float, how: str, options) -> Finding:
    max_rel, min_cos = options.max_relative_error, options.min_cosine
    quality = band(rel)
    failed = [text for bad, text in (
        (not rel <= max_rel, f"relative error {rel:.3g} > {max_rel:g}"),
        (not cos >= min_cos, f"cosine {cos:.6f} < {min_cos:g}")) if bad]
    wrong_way = not (cos >= 0.5 and rel <= 1.0)
    if wrong_way:
        hint = ("the approximate gradient points the wrong way; fix the wrapper (sign, scale, "
                "transposition) before tuning accuracy")
    elif failed:
        hint = ("make the approximation more accurate (smaller step, more samples, tighter "
                "solver tolerance), or, if this accuracy is enough for your optimiser, "
                "loosen the thresholds: max_relative_error=..., min_cosine=... in the "
                "example's options")
    else:
        hint = "nothing to fix"
    verdict = (f"fails the approximate-mode thresholds ({'; '.join(failed)})" if failed
               else f"within the thresholds (relative error <= {max_rel:g}, cosine >= "
               f"{min_cos:g})")
    return Finding(
        "gradient-quality", "error" if failed else "info",
        f"{label}: relative error {rel:.3g}, cosine similarity {cos:.6f} vs finite "
        f"differences ({how}): {quality}, {verdict}", hint, NAME, label,
        {"relative_error": rel, "cosine": cos, "band": quality,
         "max_relative_error": max_rel, "min_cosine": min_cos})


def _probed(problem, t, gt, v, session, gen) -> tuple[float, float]:
    f0 = problem.value().to(torch.float64)
    num, ana = [], []
    for _ in range(8):
        u = (torch.randint(0, 2, gt.shape, generator=gen, dtype=torch.int8) * 2 - 1).to(gt.dtype)
        d = probe.directional(problem, t, gt, v, u, f0, session.settings)
        num.append(d.numerical)
        ana.append(d.analytic)
    n, a = torch.tensor(num), torch.tensor(ana)
    rel = float((a - n).norm() / n.norm().clamp_min(1e-300))
    cos = float(torch.nn.functional.cosine_similarity(a, n, dim=0))
    return rel, cos if math.isfinite(cos) else 0.0
