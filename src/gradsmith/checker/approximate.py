"""Point 10: measure, do not judge, gradients that are approximate by design (wrappers of
external solvers, Monte-Carlo or finite-difference backwards).

Per input: relative error ``|g - g_num| / |g_num|`` and cosine similarity of the backward's
``J^T v`` with the numerical one, placed in quality bands. Only a gradient that points the
wrong way (cosine < 0.5, or relative error > 1) is an error: it cannot train anything.
"""

from __future__ import annotations

import math

import torch

from gradsmith.checker import gradients, numerics, probe
from gradsmith.checker.report import Finding
from gradsmith.checker.session import Session, Skip

NAME = "approximate"
BANDS = ((1e-6, "exact"), (1e-3, "excellent"), (1e-2, "good"), (1e-1, "fair"), (0.5, "poor"))


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
        quality = band(rel)
        bad = not (cos >= 0.5 and rel <= 1.0)
        findings.append(Finding(
            "gradient-quality", "error" if bad else "info",
            f"{label}: relative error {rel:.3g}, cosine similarity {cos:.6f} vs finite "
            f"differences ({how}): {quality}",
            "the approximate gradient points the wrong way; fix the wrapper (sign, scale, "
            "transposition) before tuning accuracy" if bad else
            "nothing to fix if this accuracy suits your optimiser", NAME, label,
            {"relative_error": rel, "cosine": cos, "band": quality}))
    return findings


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
