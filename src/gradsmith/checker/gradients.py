"""Point 1 and 8: first-order gradients against finite differences, with the kink rule."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

import torch

from gradsmith.checker import (
    approximating,
    binary_domain,
    costly,
    eigenvectors,
    estimators,
    gauge,
    kernels,
    numerics,
    opaque_tolerance,
    probe,
    reported,
    returned_buffer,
    stochastic,
    symmetric,
    systematic,
    tf32,
    unsupported,
)
from gradsmith.checker.problem import Problem
from gradsmith.checker.report import Finding
from gradsmith.checker.screen import screened
from gradsmith.checker.session import Session, Skip, backward_error

NAME = "gradients"
#: Said of a second-order finding after verified first order (see docs/check.md, second order).
SECOND_ORDER_ONLY = ("; first order is verified, so this harms only code that differentiates "
                     "twice (gradient penalties, MAML, Hessian-vector products)")
MAX_BLOCK = 128
# Second order stops re-judging an input's disagreeing elements (9 forward pairs each) once
# this many were confirmed: the double-backward mismatch is demonstrated, and its findings
# say no more than that (the rest count as mismatches, as past numerics.MAX_CONFIRM). First
# order re-judges them all: its elements decide the code (an estimator's, a mismatch).
SECOND_ORDER_ENOUGH = 8


def analytic(problem: Problem, vs: list[torch.Tensor], check: str,
             cls: type | None = None) -> list[list[torch.Tensor]]:
    """``J^T v`` for each ``v``; a raising backward becomes a ``backward-error`` finding."""
    try:
        return [problem.vjp(v) for v in vs]
    except Exception as exc:  # noqa: BLE001 - user code may raise anything
        raise backward_error(exc, check, cls) from None


def compare(session: Session, problem: Problem, check: str) -> list[numerics.InputResult]:
    """Run exact or probe comparisons for every input of ``problem``."""
    gen = session.generator(1)
    s = session.settings
    vs = numerics.random_v(problem, s.n_v, gen)
    grads = analytic(problem, vs, check, session.function_cls)
    # eigh-style inputs: compared along symmetric directions (see symmetric)
    sides = symmetric.conventional(
        grads, symmetric.read_triangles(problem, session.options.seed),
        lambda: symmetric.meant_of(session, problem.labels))
    grads = symmetric.fold(grads, sides)
    session.cache[f"symmetric:{check}"] = symmetric.finding(problem, sides, check)
    session.cache[f"vjp:{check}"] = (vs, grads)
    # A few random directions first: a correct Function passes on them in a handful of
    # forwards; any disagreement gets the element-by-element comparison (see screen).
    passed = screened(problem, vs, grads, s, session.options.seed * 1000 + 29)
    if passed is not None:
        return passed
    total = sum(x.numel() for x in problem.xs)
    # Interpreted Triton kernels make each forward 10-100 ms: random-direction probes (a few
    # forwards per input, bisection only on a failure) instead of two forwards per element.
    exact = not kernels.launched(session)
    # A slow backward (50 ms per evaluation): second order probed within a budget (costly)
    cost = costly.over_budget(problem, total) if exact and check == "second_order" else None
    session.cache[costly.KEY] = cost
    exact = exact and cost is None
    # Kernels compute in float32 inside whatever they return (a float64 output can hide a
    # float32 tanh): probes get exact mode's atol/rtol floor, not only the measured noise.
    floor = not exact and not s.user_tolerance
    s.user_tolerance = s.user_tolerance or floor
    results = []
    try:
        for t, x in enumerate(problem.xs):
            if cost is not None and any(r.failed for r in results):
                # slow and already shown to disagree: the rest would only add cost (costly)
                cost["not_compared"] = problem.labels[t:]
                break
            with tf32.for_input(session, t):  # TF32's tolerance only where it applies
                if exact and (total <= session.options.exact_max or x.numel() <= 64):
                    results.append(numerics.exact(
                        problem, t, vs, grads, s, _confirm(check, problem.labels[t]),
                        SECOND_ORDER_ENOUGH if check == "second_order" else None))
                else:
                    results.append(probe.probe(problem, t, vs, grads, s, gen,
                                               costly.ENOUGH if cost is not None else None))
    finally:
        s.user_tolerance = s.user_tolerance and not floor
    return results


def _confirm(check: str, label: str) -> int:
    """How many disagreeing elements exact mode re-judges (9 forward pairs each). None for a
    double-backward mismatch once an earlier input set reported the Function's one
    ``double-backward-unsupported`` warning (every mismatch folds into it): whatever the
    re-judging leaves, the merge drops it (:mod:`reported`); only its info findings (a kink,
    forward NaN next to an element) could be new. First order always re-judges: its elements
    decide which code an input gets (an estimator's, a mismatch, none)."""
    if check == "second_order" and (reported.known("double-backward-unsupported", None)
                                    or reported.known("double-backward-mismatch", label)):
        return 0
    return numerics.MAX_CONFIRM


def run(session: Session) -> list[Finding]:
    if session.surrogate is not None or session.intended is not None:
        raise Skip("a surrogate= or intended= gradient was declared: backward is compared "
                   "with it instead", relies_on="surrogate")
    if session.options.approximate:
        raise Skip("approximate=True: gradient quality is measured and judged against the "
                   "approximate-mode thresholds instead", relies_on="approximate")
    if session.options.extra.get("reference") is not None:
        raise Skip("a reference= was given: every gradient is judged against its autograd "
                   "at the Function's own precision instead", relies_on="reference")
    if session.options.unbiased:
        return stochastic.on_average(session, session.problem, None, NAME)
    if (table := binary_domain.applies(session, session.problem)) is not None:
        return binary_domain.run(session, session.problem, table)  # 0/1 gates (spikes)
    problem = symmetric.contracted(session, session.problem)  # stated symmetric inputs
    gauged = gauge.orthonormal_axes(problem)  # singular/eigen vectors: sign/phase aligned
    problem = gauge.aligned(problem, gauged)
    results = compare(session, problem, NAME)
    at_returned_precision(session, results)
    symmetric_notes = session.cache[f"symmetric:{NAME}"]
    explained = approximating.explain(session, problem, results, NAME)
    explained += approximating.solved(session, problem, results, NAME)  # a solver's stairs
    if any(res.failed for res in results) and (idle := returned_buffer.untouched(session,
                                                                             NAME)):
        return idle  # forward computed nothing on these inputs: nothing to compare
    findings, replaced = estimators.detect(session, problem, results)
    findings += explained
    missing, covered = _params_without_gradient(session, results)
    findings += missing
    replaced |= covered
    # float32's element-wise tolerance (1.2 %) hides a wrong factor; directions do not
    sharp, flagged = systematic.deviations(session, problem, results,
                                           *session.cache["vjp:gradients"], NAME)
    findings += sharp
    replaced |= flagged
    if any(res.mismatches for res in results if res.t not in replaced):  # a compiled solve
        vague, flagged = opaque_tolerance.findings(
            session, [r for r in results if r.t not in replaced],
            session.cache["vjp:gradients"][1], NAME)
        findings += vague
        replaced |= flagged
    for res in results:
        if res.t not in replaced:
            findings += findings_for(session, problem, res, NAME, kind="gradient")
    if not any(res.failed for res in results):
        findings += not_exercised(session.cache["vjp:gradients"][1], results, NAME)
    return (findings + symmetric_notes + gauge.finding(problem, gauged, NAME)
            + eigenvectors.finding(session, NAME))


def _returned_eps(session: Session) -> dict[str | None, float]:
    """Input label -> machine epsilon of the gradient backward returns for it, where that is
    a lower precision than the input's (``.float()`` for a float64 input: the structure
    check's grad-dtype-mismatch warning)."""
    found = {}
    for f in session.report.findings:
        if f.code == "grad-dtype-mismatch" and f.details.get("precision"):
            dtype = getattr(torch, str(f.details["got"]).replace("torch.", ""), None)
            if isinstance(dtype, torch.dtype) and torch.finfo(dtype).eps > session.settings.eps:
                found[f.input] = torch.finfo(dtype).eps
    return found


def _tolerances(session: Session, eps: float) -> tuple[float, float]:
    """First-order tolerances at precision ``eps`` (as the setup's low-precision mode)."""
    s = session.settings
    return max(s.atol, 1e4 * eps), max(s.rtol, 1e5 * eps)


def at_returned_precision(session: Session, results: list[numerics.InputResult]) -> None:
    """Judge an input whose gradient backward returns in a lower precision at that
    precision: disagreements within it are the precision problem the grad-dtype-mismatch
    warning names, not a wrong gradient."""
    lower = _returned_eps(session)
    for res in results:
        eps = lower.get(res.label)
        if eps is None or not res.mismatches or res.nan_analytic or res.probe.get("failed"):
            continue
        atol, rtol = _tolerances(session, eps)
        if all(abs(e.analytic - e.numerical) <= atol + rtol * abs(e.numerical)
               for e in res.mismatches):
            res.mismatches = []


@contextmanager
def returned_precision(session: Session) -> Iterator[None]:
    """Finite-difference step and tolerances of the lowest precision backward returns a
    gradient in, for differentiating backward itself (second order); restored afterwards."""
    lower = _returned_eps(session)
    s = session.settings
    saved = (s.h, s.atol, s.rtol, s.eps)
    if lower:
        eps = max(lower.values())
        s.h, s.eps = max(s.h, 2 * eps ** (1 / 3)), eps
        if not s.user_tolerance:
            s.atol, s.rtol = _tolerances(session, eps)
    try:
        yield
    finally:
        s.h, s.atol, s.rtol, s.eps = saved


def not_exercised(grads: list[list[torch.Tensor]], results: list[numerics.InputResult],
                  check: str) -> list[Finding]:
    """A ``not-exercised`` finding when the comparison held only vacuously: backward gave 0
    for every input and direction (and finite differences agreed: forward is constant at
    these inputs), or forward is NaN/inf next to every element, so nothing was compared."""
    zero = all(bool((g == 0).all()) for per_v in grads for g in per_v)
    numels = [g.numel() for g in grads[0]] if grads else []
    uncompared = bool(results) and all(
        len(res.nan_numerical) >= n for res, n in zip(results, numels))
    if not (zero or uncompared):
        return []
    why = ("backward returned 0 for every input on every direction tried, and finite "
           "differences agree: forward is constant at these inputs (an empty quantizer "
           "window, a step function away from its threshold, inputs outside the region where "
           "forward changes)" if zero else
           "forward is NaN/inf next to every input element, so no element was compared")
    return [Finding(
        "not-exercised", "warning",
        f"backward was never exercised: {why}; zeros agreeing with zeros verify nothing, so "
        "the verdict is INCOMPLETE",
        "give example inputs where forward changes (inside a quantizer's clipping range, "
        "next to a step's threshold, a non-empty window: grad_min < grad_max)", check,
        details={"incomplete": True})]


def _params_without_gradient(session: Session, results: list[numerics.InputResult]
                             ) -> tuple[list[Finding], set[int]]:
    """Parameters of a module argument that backward leaves without any gradient (the
    checkpointing pattern with torch.autograd.grad on the inputs only): one finding per module."""
    args = session.subject.args
    _, grads = session.cache["vjp:gradients"]
    by_module: dict[str, list[int]] = {}
    for res in results:
        d = args.inputs[res.t]
        if d.param is not None and res.failed and not any(bool(g[res.t].any()) for g in grads):
            by_module.setdefault(args.labels[d.leaf], []).append(res.t)
    findings = []
    for module, ts in by_module.items():
        names = [args.inputs[t].label for t in ts]
        findings.append(Finding(
            "missing-param-grad", "error",
            f"the parameters of the module passed as {module} ({', '.join(names)}) get no "
            "gradient, although the output depends on them (finite differences are not 0): "
            "backward can only return gradients for apply's own arguments, so it must "
            "accumulate them, and it does not",
            "in backward, recompute the module's outputs under torch.enable_grad() and call "
            "torch.autograd.backward(outputs, grad_outputs), which accumulates into the "
            "parameters (torch.autograd.grad(outputs, inputs) gives the inputs' gradients only)",
            NAME, names[0], {"module": module, "parameters": names}))
    return findings, {t for ts in by_module.values() for t in ts}


def findings_for(session: Session, problem: Problem, res: numerics.InputResult, check: str,
                 kind: str) -> list[Finding]:
    """Turn one input's comparison into findings (``kind``: "gradient" or "double-backward")."""
    x = problem.xs[res.t]
    label = res.label
    out: list[Finding] = []
    code = "gradient-mismatch" if kind == "gradient" else "double-backward-mismatch"
    if res.nan_analytic:
        where = ", ".join(problem.element(res.t, j) for j in res.nan_analytic[:5])
        first = kind == "gradient"  # second order: harms only code that differentiates twice
        out.append(Finding(
            "nan-gradient" if kind == "gradient" else "nan-double-backward",
            "error" if first else "warning",
            f"{kind} for {label} is NaN/inf at {where} ({len(res.nan_analytic)} elements) "
            "while the function is finite there" + ("" if first else SECOND_ORDER_ONLY),
            "guard divisions and logs in backward (e.g. clamp the denominator, use "
            "torch.where on a safe value) so the gradient is finite where forward is"
            + ("" if first else unsupported.REQUIRE_HINT), check, label,
            {"elements": res.nan_analytic[:20]}))
    if res.mismatches:
        worst = max(res.mismatches, key=lambda e: abs(e.analytic - e.numerical))
        where = ", ".join(problem.element(res.t, e.index) for e in res.mismatches[:5])
        more = "" if len(res.mismatches) <= 5 else f" and {len(res.mismatches) - 5} more"
        if res.mode == "probe":
            scope = (f"{'widespread; ' if res.probe.get('widespread') else ''}elements "
                     f"located by bisection among {x.numel()}")
        else:
            scope = f"{len(res.mismatches)} of {x.numel()} elements"
        msg = (f"{kind} of {label} disagrees with finite differences at {where}{more} "
               f"({scope}); worst "
               f"{problem.element(res.t, worst.index)}: analytic {worst.analytic:.6g}, "
               f"numerical {worst.numerical:.6g} (projected on a random grad_output)")
        if res.probe.get("failed"):
            msg += f"; random-direction probe ratio analytic/numerical {res.probe['ratio']:.6g}"
        # hundreds of forwards: not for a mismatch an earlier input set already reported
        if kind == "gradient" and not kernels.launched(session) \
                and not reported.known(code, label):
            _block(session, problem, res.t, worst.index, label)
            msg += _entry_hint(session, label)
        block = session.cache.get(f"block:{label}") if kind == "gradient" else None
        hint = _hint(kind)
        if kind == "gradient" and (problem.complex_inputs or problem.complex_outputs):
            hint += _COMPLEX_HINT
        out.append(Finding(code, "error", msg, hint, check, label, {
            "mode": res.mode,
            "elements": [[e.index, e.analytic, e.numerical] for e in res.mismatches[:20]],
            "probe": res.probe,
            # Where report.jacobians[label] sits in the full Jacobian (flat output index x
            # flat input index), so heatmap axes can be labelled.
            "jacobian_block": {"row_start": block["rows"][0], "col_start": block["cols"][0]}
            if block and block["rows"] and block["cols"] else None}))
    elif res.probe.get("failed"):
        spread = " across many elements" if res.probe.get("widespread") else ""
        out.append(Finding(
            code, "error",
            f"{kind} of {label} disagrees with finite differences{spread}: along a random "
            f"direction analytic {res.probe['analytic']:.10g} vs numerical "
            f"{res.probe['numerical']:.10g} (ratio {res.probe['ratio']:.6g}, tolerance "
            f"{res.probe['tol']:.2g} from the measured finite-difference noise)",
            _hint(kind), check, label, {"mode": res.mode, "probe": res.probe}))
    if res.kinks and not res.mismatches:
        where = ", ".join(problem.element(res.t, e.index) for e in res.kinks[:5])
        e = res.kinks[0]
        out.append(Finding(
            "kink", "info",
            f"{label} sits on a non-differentiable point at {where} "
            f"({len(res.kinks)} elements): analytic {e.analytic:.6g} lies between the one-sided "
            f"derivatives {e.left:.6g} and {e.right:.6g}, accepted as a valid subgradient",
            "nothing to fix; move the example inputs off the kink to check the gradient there "
            "exactly", check, label, {"elements": [k.index for k in res.kinks[:20]]}))
    if res.nan_numerical and not res.failed:
        out.append(Finding(
            "nan-numerical", "info",
            f"forward is NaN/inf next to {len(res.nan_numerical)} element(s) of {label}; "
            "those elements were not compared",
            "choose example inputs inside the function's domain", check, label,
            {"elements": res.nan_numerical[:20]}))
    return out


_COMPLEX_HINT = (
    "; with complex tensors PyTorch's gradient is the conjugate Wirtinger derivative, as "
    "gradcheck checks it: for a holomorphic f, grad_z = grad_output * conj(f'(z)) (y = a * z: "
    "grad_z = g * a.conj(), grad_a = g * z.conj()); a missing .conj() is the usual cause, "
    "and a linear map's backward is its adjoint (fft: ifft(g, norm='forward'))")


def _hint(kind: str) -> str:
    if kind == "gradient":
        return ("re-derive backward for this input (chain rule: multiply by grad_output, "
                "transpose matmuls, sum over broadcast dimensions); the Jacobian heatmap "
                "(gradsmith check --html) shows transposed or shifted patterns")
    return ("make backward differentiable: compute it from saved inputs/outputs with "
            "differentiable torch ops (no .detach(), .data, numpy or tensors computed in "
            "forward and saved as intermediates; recompute them from the inputs or save "
            "outputs), or decorate backward with @once_differentiable")


def _entry_hint(session: Session, label: str) -> str:
    block = session.report.jacobians.get(label)
    if block is None:
        return ""
    a, n = block
    diff = (a - n).abs()
    if diff.numel() == 0:
        return ""
    i, j = divmod(int(diff.argmax()), diff.shape[1])
    info = session.cache.get(f"block:{label}", {})
    row = info.get("rows", [0])[i] if info else i
    col = info.get("cols", [0])[j] if info else j
    problem = session.problem
    t = [*problem.labels].index(label)
    return (f"; Jacobian entry d {problem.out_label(row)} / d {problem.element(t, col)}"
            f": analytic {float(a[i, j]):.6g}, numerical {float(n[i, j]):.6g}")


def _block(session: Session, problem: Problem, t: int, j: int, label: str) -> None:
    """Fill ``report.jacobians[label]``: a block around element ``j`` (heatmaps in the CLI)."""
    try:
        x = problem.xs[t]
        n = x.numel()
        # Big problems get a small crop: every column costs two forward passes.
        size = MAX_BLOCK if n * problem.m <= 1e6 else 16
        c0 = max(0, min(j - size // 2, n - size))
        cols = list(range(c0, min(n, c0 + size)))
        h = session.settings.h
        num = torch.stack([numerics.column(problem, t, c, h) for c in cols], dim=1)
        m = num.shape[0]
        center = int(num[:, cols.index(j)].abs().argmax())
        rsize = MAX_BLOCK if size == MAX_BLOCK else 32
        r0 = max(0, min(center - rsize // 2, m - rsize))
        rows = list(range(r0, min(m, r0 + rsize)))
        ana = []
        for r in rows:
            v = torch.zeros(m, dtype=problem.xs[t].dtype)
            v[r] = 1
            ana.append(problem.vjp(v)[t].reshape(-1)[cols].to(torch.float64))
        a = torch.stack(ana) if ana else torch.zeros(0, len(cols), dtype=torch.float64)
        session.report.jacobians[label] = (a, num[rows].to(torch.float64))
        session.cache[f"block:{label}"] = {"rows": rows, "cols": cols}
    except Exception:  # noqa: BLE001 - the heatmap is a diagnostic extra, never a failure
        return


def relative(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-300) if math.isfinite(a) else math.inf
