"""``check``: run every applicable property check and collect a :class:`Report`."""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from importlib import import_module
from typing import Any

import torch

from gradsmith._errors import GradsmithError
from gradsmith._requires import require_onnx
from gradsmith.checker import (
    approximate,
    declared,
    effective_dtype,
    environment,
    forward_only,
    integer_output,
    kernels,
    progress,
    tf32,
    uninitialised,
)
from gradsmith.checker.deploy import DEPLOY_MODULES, OPT_IN
from gradsmith.checker.deploy import matrix as compat_matrix
from gradsmith.checker.deploy.fallback import first_forward
from gradsmith.checker.inputs import resolve_target
from gradsmith.checker.ranks import single_group_findings
from gradsmith.checker.reentrant import backward_when_refused
from gradsmith.checker.report import Finding, Report
from gradsmith.checker.rng import host_restored_once, probe_device
from gradsmith.checker.session import (
    Incomplete,
    Options,
    Session,
    Skip,
    UserCodeError,
)
from gradsmith.checker.sparse_values import on_values
from gradsmith.checker.subject import Subject

# Order matters: structure and mutation problems explain later failures (and cost a few
# calls), so they come first; then first-order gradients, where most bugs are found, so a
# Function that runs out of time still has them (its row keeps the checks that finished).
CHECK_MODULES = {
    "structure": "gradsmith.checker.structure",
    "mutation": "gradsmith.checker.mutation",
    "reference": "gradsmith.checker.reference",
    "gradients": "gradsmith.checker.gradients",
    "surrogate": "gradsmith.checker.surrogate",
    "approximate": "gradsmith.checker.approximate",
    "second_order": "gradsmith.checker.second_order",
    "forward_ad": "gradsmith.checker.forward_ad",
    "vmap": "gradsmith.checker.vmap",
    "robustness": "gradsmith.checker.robustness",
    "randomness": "gradsmith.checker.randomness",
    "hygiene": "gradsmith.checker.hygiene",
    **DEPLOY_MODULES,  # compile, export, autocast, ...: after every eager check
}
CHECK_NAMES = tuple(CHECK_MODULES)
FATAL = {"wrong-grad-count", "non-tensor-grad", "forward-error", "no-gradient-path",
         "backward-error", "invented-input", "integer-output-backward", environment.CODE,
         "unset-global"}
_OPTIONS = {"atol", "rtol", "approximate", "max_relative_error", "min_cosine", "seed", "checks",
            "exact_max", "name", "compat", "gaps", "compile_backend", "unbiased", "onnx"}


def check(fn: Any, *args: Any, surrogate: Any = None, intended: Any = None,
          reference: Any = None, **options: Any) -> Report:
    """Verify a custom autograd Function (or any differentiable callable) on example inputs.

    Args:
        fn: a ``torch.autograd.Function`` subclass, its ``.apply``, or a callable of tensors.
        *args: example inputs as the user passes them (any floating dtype, non-tensors, None,
            tensors nested in lists/tuples/dicts). They are never modified.
        surrogate: for intentional custom gradients (straight-through estimators): a
            differentiable function with the same signature whose autograd gradient the
            backward must reproduce.
        intended: for intended modifications that are the gradient of no forward (clipping,
            sparsification, noise, scaling, reversal): ``intended(*args, *grad_outputs)``
            returns what backward must return (one value per forward argument).
            With no ``args``, the examples registered with :func:`gradsmith.example` are
            used (all of them, findings merged into one report).
        reference: plain PyTorch computing what the Function computes, with the same
            signature: outputs and every gradient are judged against its float64 autograd,
            within a tolerance derived from its own error at the Function's precision (no
            atol to set; what kernels computing in float32 need), instead of by finite
            differences (see :mod:`gradsmith.checker.reference`). Default: a registered
            example's ``reference=``.
        **options: ``atol``/``rtol`` (first-order tolerances, default 1e-5/1e-3),
            ``approximate`` (judge gradient quality against ``max_relative_error`` and
            ``min_cosine`` instead of exact agreement), ``seed``,
            ``checks`` (subset of :data:`CHECK_NAMES`), ``exact_max`` (largest total input
            size for element-by-element differences, default 1000), ``name``, ``compat``
            (True: also run the deployment checks, compile, export, autocast, float32,
            checkpoint, torch.func and vmap, and build the compatibility matrix; False: none
            of them, even those named in ``checks``; default: only those named in
            ``checks``, so a plain call answers "are my gradients right" in a fraction of
            the time; ``gradsmith check`` runs them all unless ``--no-compat``), ``gaps``
            (matrix column -> why it is a known gap), ``onnx`` (True: also run the opt-in
            ONNX check, ``torch.onnx.export`` under ONNX Runtime; needs the ``onnx`` extra;
            default False, its column then ``n/a``), ``compile_backend`` (``"aot_eager"``),
            ``unbiased`` (True: backward draws random numbers by design and the *mean* of its
            draws must be the gradient, of forward or of the declared ``surrogate``/
            ``intended``; see :mod:`gradsmith.checker.stochastic`).

    Returns:
        A :class:`Report`; ``report.passed`` is False when any finding is an error.

    Raises:
        GradsmithError: for unusable arguments of ``check`` itself (unknown option or check
            name, no floating-point tensor to differentiate).

    Example:
        >>> import torch, gradsmith
        >>> class Square(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x):
        ...         ctx.save_for_backward(x)
        ...         return x * x
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         (x,) = ctx.saved_tensors
        ...         return 2 * x * g
        >>> gradsmith.check(Square, torch.randn(3, requires_grad=True)).passed
        True
    """
    from gradsmith._triton.late import adopt

    adopt()  # kernels the caller imported compiled, on a machine without a GPU: interpreted
    if not args:
        if reference is not None:
            options = {**options, "reference": reference}
        return _check_registered(fn, surrogate, {**options, "intended": intended}
                                 if intended is not None else options)
    start = time.perf_counter()
    opts, selected, name = _parse_options(options)
    target, args = on_values(resolve_target(fn, name), args)  # a sparse operand: its values
    subject = Subject(target, args, opts.seed)
    if not subject.args.inputs:
        raise GradsmithError(
            f"check: no floating-point or complex tensor (nor module parameter requiring "
            f"grad) among the arguments of {target.name} (got "
            f"{[type(a).__name__ for a in args]}); pass example inputs such as "
            f"`gradsmith.check({target.name}, torch.randn(4, 3, dtype=torch.float64))`")
    report = Report(name=target.name)
    declared.validate(target.name, surrogate, intended, opts)
    opts.extra["reference"] = _validated_reference(target.name, reference, surrogate, intended)
    session = Session(subject, opts, report, surrogate, intended)
    session.settings.atol, session.settings.rtol = opts.atol, opts.rtol
    session.settings.user_tolerance = opts.user_tolerance
    launched = session.cache["kernels:before"] = kernels.launches()
    # Warnings from user code must not abort the check (e.g. under `-W error`); they are
    # reported as info findings instead.
    with torch.enable_grad(), warnings.catch_warnings(record=True) as caught, _threads_for(
            subject), host_restored_once(), probe_device(args), backward_when_refused():
        warnings.simplefilter("always")
        if _prepare(session):
            _run_checks(session, selected)
    if any(name in DEPLOY_MODULES for name in selected):
        compat_matrix.apply_gaps(report, opts.extra.get("gaps", {}))
        report.compat = compat_matrix.build(report)
    report.findings += _warning_findings(caught) + _constant_findings(subject)
    report.findings += single_group_findings(subject.target.function_cls or subject.target.call)
    report.findings += kernels.interpreted(launched)
    report.sort()
    report.elapsed = time.perf_counter() - start
    return report


def _validated_reference(name: str, reference: Any, surrogate: Any, intended: Any) -> Any:
    if reference is None:
        return None
    if not callable(reference):
        raise GradsmithError(
            f"check: reference must be a plain-PyTorch callable with the signature of {name}, "
            f"got {type(reference).__name__}; e.g. reference=lambda x, w: x @ w")
    if surrogate is not None or intended is not None:
        raise GradsmithError(
            f"check: reference= and {'surrogate=' if surrogate is not None else 'intended='} "
            f"do not combine for {name}: a reference says backward is its autograd gradient, "
            "a declaration says it is something else; give one")
    return reference


def _constant_findings(subject: Subject) -> list[Finding]:
    """Say which floating inputs were held constant (gradcheck's rule: when some inputs require
    grad, only those are differentiated), so an unchecked gradient is never a surprise."""
    names = subject.args.constant_labels
    if not names:
        return []
    return [Finding(
        "constant-input", "info",
        f"{', '.join(names)} held constant: other inputs require grad and these do not, so "
        "their gradients were not checked",
        "pass them with requires_grad=True to check their gradients too (or pass no input "
        "with requires_grad to check every floating-point input)", "setup",
        details={"inputs": list(names)})]


def _check_registered(fn: Any, surrogate: Any, options: dict[str, Any]) -> Report:
    """``check(fn)`` without arguments: every registered example, merged into one report."""
    from gradsmith._example import examples_of

    examples = examples_of(fn)
    target = resolve_target(fn, options.get("name"))
    if not examples:
        raise GradsmithError(
            f"check: no example inputs for {target.name}: got no arguments and no registered "
            f"example; pass them (`gradsmith.check({target.name}, torch.randn(4, 3))`) or "
            f"register one with `@gradsmith.example(lambda: (torch.randn(4, 3),))`")
    merged = Report(name=target.name)
    for i, ex in enumerate(examples):
        label = ex.name or str(i)
        opts = {**ex.options, **options}
        args = ex.make_args()
        if not args:
            raise GradsmithError(
                f"check: example {label!r} of {target.name} returned no arguments; make its "
                "factory return the input tuple, e.g. `lambda: (torch.randn(4, 3),)`")
        opts.setdefault("reference", ex.reference)
        report = check(fn, *args, surrogate=surrogate or ex.surrogate, **opts)
        if i:
            merged.merge_exercised(report)
        for f in report.findings:
            f.details["example"] = label
            f.message = f"[example {label}] {f.message}"
        merged.findings += report.findings
        merged.checks += [c for c in report.checks if c not in merged.checks]
        merged.skipped.update({k: v for k, v in report.skipped.items() if k not in merged.checks})
        merged.elapsed += report.elapsed
        merged.add_timings(report)
        merged.jacobians.update({f"{label}:{k}": v for k, v in report.jacobians.items()})
        if report.saved_bytes is not None:
            merged.saved_bytes = max(merged.saved_bytes or 0, report.saved_bytes)
        for column, cell in report.compat.items():
            merged.compat[column] = compat_matrix.merge([merged.compat.get(column, cell), cell])
    merged.skipped = {k: v for k, v in merged.skipped.items() if k not in merged.checks}
    merged.sort()
    return merged


@contextmanager
def _threads_for(subject: Subject) -> Iterator[None]:
    """One intra-op thread for small inputs, restored afterwards.

    A check runs thousands of tiny forward/backward passes; on a busy machine the thread pool's
    hand-off costs up to 300x the work itself (measured: conv1d on 54 elements, 3.4 ms with
    two threads vs 0.01 ms with one).
    """
    small = sum(t.numel() for t in subject.args.originals) < 100_000
    before = torch.get_num_threads()
    if small and before > 1:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)


def _warning_findings(caught: list[warnings.WarningMessage]) -> list[Finding]:
    torch_dir = os.path.dirname(torch.__file__)
    seen: dict[str, warnings.WarningMessage] = {}
    for w in caught:
        if not str(w.filename).startswith(torch_dir):
            seen.setdefault(f"{w.category.__name__}: {w.message}", w)
    return [Finding("user-warning", "info", f"the Function emitted {text} ({w.filename}:"
                    f"{w.lineno})", "address the warning or silence it deliberately", "setup")
            for text, w in list(seen.items())[:5]]


def _parse_options(options: dict[str, Any]) -> tuple[Options, list[str], str | None]:
    unknown = set(options) - _OPTIONS
    if unknown:
        raise GradsmithError(
            f"check: unknown option(s) {sorted(unknown)}; expected some of {sorted(_OPTIONS)}")
    opts = Options(user_tolerance="atol" in options or "rtol" in options)
    for key in ("atol", "rtol"):
        if key in options:
            value = options[key]
            if not isinstance(value, (int, float)) or value < 0:
                raise GradsmithError(f"check: {key} must be a number >= 0, got {value!r}")
            setattr(opts, key, float(value))
    opts.approximate = bool(options.get("approximate", False))
    unbiased = options.get("unbiased", False)
    if not isinstance(unbiased, bool):
        raise GradsmithError(f"check: unbiased must be True or False, got {unbiased!r}; "
                             "unbiased=True declares a random backward whose mean is the "
                             "gradient")
    if unbiased and opts.approximate:
        raise GradsmithError("check: unbiased=True and approximate=True do not combine: "
                             "unbiased=True judges a random backward by the mean of its draws, "
                             "approximate=True judges a deterministic one's accuracy; pick one")
    opts.unbiased = unbiased
    approximate.configure(opts, options)
    opts.seed = int(options.get("seed", 0))
    exact_max = options.get("exact_max", opts.exact_max)
    if not isinstance(exact_max, int) or exact_max < 0:
        raise GradsmithError(f"check: exact_max must be an int >= 0, got {exact_max!r}")
    opts.exact_max = exact_max
    opts.extra["gaps"] = compat_matrix.validate_gaps(options.get("gaps"))
    backend = options.get("compile_backend", "aot_eager")
    if backend not in ("aot_eager", "inductor", "eager"):
        raise GradsmithError(f"check: compile_backend must be 'aot_eager', 'inductor' or "
                             f"'eager', got {backend!r}")
    opts.extra["compile_backend"] = backend
    compat = options.get("compat")
    if compat is not None and not isinstance(compat, bool):
        raise GradsmithError(f"check: compat must be True or False, got {compat!r}; "
                             "compat=True also runs the deployment checks (compile, export, "
                             "autocast, ...)")
    # Default: the deployment checks only when checks= names them (a unit test asking for
    # gradients does not pay seconds of compile and export).
    opts.extra["compat"] = compat if compat is not None else options.get("checks") is not None
    onnx = _onnx_option(options, compat)
    # Opt-in checks (onnx: seconds per Function, an extra) run only when asked for.
    selected = [c for c in CHECK_NAMES if c not in OPT_IN or (c == "onnx" and onnx)]
    if options.get("checks") is not None:
        wanted = [options["checks"]] if isinstance(options["checks"], str) else list(
            options["checks"])
        bad = [c for c in wanted if c not in CHECK_MODULES]
        if bad:
            raise GradsmithError(
                f"check: unknown check name(s) {bad}; choose from {list(CHECK_NAMES)}")
        selected = [c for c in CHECK_NAMES if c in wanted or (c == "onnx" and onnx)]
    if "onnx" in selected:
        require_onnx("check", "onnx=True" if onnx else "checks=['onnx']")
    if not opts.extra["compat"]:  # compat=False also wins over an example's own checks=
        selected = [c for c in selected if c not in DEPLOY_MODULES or (c == "onnx" and onnx)]
    return opts, selected, options.get("name")


def _onnx_option(options: dict[str, Any], compat: bool | None) -> bool:
    """``onnx=True``: also run the opt-in ONNX check (alone among the deployment checks
    unless ``compat=True`` or ``checks=`` names others)."""
    onnx = options.get("onnx", False)
    if not isinstance(onnx, bool):
        raise GradsmithError(f"check: onnx must be True or False, got {onnx!r}; onnx=True also "
                             "exports to ONNX and runs it under ONNX Runtime")
    if onnx and compat is False:
        raise GradsmithError("check: onnx=True and compat=False do not combine: compat=False "
                             "turns the deployment checks off, onnx=True asks for one; drop "
                             "one of them")
    return onnx


def _prepare(session: Session) -> bool:
    """Run forward once in float64 (falling back to the user's dtype) and find the outputs."""
    subject, report = session.subject, session.report
    tf32_before = tf32.launches()
    out = first_forward(session)
    if out is None:
        return False
    subject.discover_outputs(out)
    if (only := forward_only.finding(subject.target.function_cls)) is not None:
        report.findings.append(only)  # no backward by design: nothing to differentiate
        return False
    if not subject.out_pos:
        if (found := integer_output.finding(subject, out)) is not None:
            report.findings.append(found)  # `.long()` with an STE backward: never runs
            return False
        report.findings.append(Finding(
            "no-gradient-path", "error",
            "no output carries a gradient: every output is non-floating, detached, or "
            "marked non-differentiable",
            "return outputs computed from the inputs (do not .detach() them) and do not mark "
            "every output non-differentiable", "setup"))
        return False
    outs = subject.select(out)
    if unwritten := uninitialised.outputs(session, outs):  # new_empty: skip value checks
        report.findings.append(uninitialised.finding(
            unwritten, [f"{label} {tuple(x.shape)}" for label, x in
                        zip(subject.labels, subject.base())]))
        session.cache[uninitialised.KEY] = uninitialised.skip_reason(unwritten)
    bad = [label for label, o in zip(subject.out_labels, outs) if not torch.isfinite(o).all()]
    if bad:
        report.findings.append(Finding(
            "nan-output", "warning",
            f"forward returns NaN/inf in {', '.join(bad)} at the example inputs; gradients "
            "there cannot be compared",
            "choose example inputs inside the function's domain, or guard the forward "
            "(clamp, torch.where) if these values are not intended", "setup"))
    low = [o.dtype for o in outs if o.dtype != torch.float64]
    if subject.dtype is None or low:
        dtype = max((o.dtype for o in outs), key=lambda d: torch.finfo(d).eps)
        _low_precision(session, dtype, announce=subject.dtype == torch.float64)
    elif (computed := effective_dtype.computed_dtype(session, outs)) is not None:
        _low_precision(session, computed, announce=False)  # float64 holding float32 values
        report.findings.append(effective_dtype.finding(computed, session))
    tf32.calibrate(session, tf32_before)  # float32 products rounded to TF32 on a GPU
    return True


_HALF_ATOL, _HALF_RTOL = 0.05, 0.1


def _low_precision(session: Session, dtype: torch.dtype, announce: bool) -> None:
    eps = torch.finfo(dtype).eps
    s = session.settings
    s.eps = eps
    s.h = eps ** (1 / 3) * 2
    if not session.options.user_tolerance:
        # float32's calibration (atol 1.2e-3, rtol 1.2e-2); half precision's would be atol 10,
        # rtol 100, under which no gradient can fail: capped where a wrong factor still shows
        s.atol = max(s.atol, min(1e3 * eps * 10, _HALF_ATOL))
        s.rtol = max(s.rtol, min(1e5 * eps, _HALF_RTOL))
    if announce:
        session.report.findings.append(Finding(
            "low-precision-numerics", "info",
            f"outputs are {dtype} even for float64 inputs: finite differences use step "
            f"{s.h:.1g} and tolerances atol={s.atol:.1g}, rtol={s.rtol:.1g}",
            "let forward compute in its input dtype for a more sensitive check", "setup"))


def _run_checks(session: Session, selected: Iterable[str]) -> None:
    """Run the selected checks. Each ends as held or failed (it returned; its name goes into
    ``report.checks``), not applicable (``Skip``: ``report.skipped`` says why), or not
    established (``Incomplete``, a crash, or a skip relying on a check that did not run to the
    end): an INCOMPLETE finding, so the verdict can only be PASSED when every planned check
    that applies held."""
    report = session.report
    relied: dict[str, str] = {}
    for name in selected:
        began = time.perf_counter()
        _run_one(session, name, relied)
        # where the time went, whatever the outcome (report.timings)
        report.timings[name] = report.timings.get(name, 0.0) + time.perf_counter() - began
    unfinished = {f.check for f in report.incomplete if f.code != "not-exercised"}
    for name, other in relied.items():
        if other not in report.checks or other in unfinished:
            report.findings.append(_incomplete(
                name, f"{report.skipped.pop(name)}, but the {other} check "
                f"{'did not run to the end' if other in unfinished else 'did not run'}"))
    progress.notify(None, report)


def _run_one(session: Session, name: str, relied: dict[str, str]) -> None:
    """Run check ``name``; record in the report whether it held, failed, did not apply
    (``relied``: name -> the check its skip relies on) or was not established."""
    report = session.report
    progress.notify(name, report)
    if any(f.code in FATAL for f in report.findings):
        report.skipped[name] = "skipped after a structural or crashing failure (see errors)"
        return
    if name in uninitialised.VALUE_CHECKS and uninitialised.KEY in session.cache:
        report.skipped[name] = session.cache[uninitialised.KEY]
        return
    module = import_module(CHECK_MODULES[name])
    cause = None  # the user code's own exception, when the check stopped on one
    try:
        kernels.applies(name, session)
        found = module.run(session)
    except Incomplete as why:
        report.findings.append(_incomplete(name, str(why)))
        return
    except Skip as skip:
        report.skipped[name] = str(skip)
        if skip.relies_on is not None:
            relied[name] = skip.relies_on
        return
    except UserCodeError as err:
        found, cause = [err.finding], err.exc
    except Exception as exc:  # noqa: BLE001 - never let user code crash the report
        if (path := environment.broken_artifact(exc)) is not None:
            report.findings.append(environment.finding(path, name, type(exc).__name__))
            return
        report.findings.append(Finding(
            "check-crashed", "warning",
            f"the {name} check could not run: {type(exc).__name__}: {_first_line(exc)}; "
            "what it verifies is unverified, so the verdict is INCOMPLETE",
            "run the Function by hand on the example inputs; report a gradsmith bug if "
            "it works there", name, details={"incomplete": True}))
        return
    found = environment.screened(found, name, cause)  # a broken compile cache: not the Function's
    report.checks.append(name)
    known = {(f.code, f.input) for f in report.findings}
    report.findings += [f for f in found if (f.code, f.input) not in known]


def _first_line(exc: BaseException) -> str:
    """An exception's first line, at most 300 characters (PyTorch's dispatcher errors list
    every backend over dozens of lines)."""
    text = (str(exc).strip().splitlines() or [""])[0]
    return text if len(text) <= 300 else text[:297] + "..."


def _incomplete(name: str, why: str) -> Finding:
    return Finding("check-incomplete", "warning",
                   f"the {name} check could not be completed: {why}; what it verifies is "
                   "unverified, so the verdict is INCOMPLETE",
                   "see the reason; fix the declaration or the example inputs it names", name,
                   details={"reason": why, "incomplete": True})
