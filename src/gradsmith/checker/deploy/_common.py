"""What the deployment checks share: one evaluation of ``outputs`` and ``J^T v`` under any
transformation of the call, the eager reference it is compared with, and quiet Dynamo.

Every deployment check answers the same question, "does the Function give the same outputs and
the same vector-Jacobian product ``J^T v`` there as in eager mode?", for one fixed cotangent
``v`` per output (seeded), on the example inputs, from the replayed random state.
"""

from __future__ import annotations

import io
import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stderr
from dataclasses import dataclass
from typing import Any

import torch

from gradsmith.checker.report import Finding
from gradsmith.checker.session import Session
from gradsmith.checker.subject import seeded, torch_seed_only

_TORCH_DIR = os.path.dirname(torch.__file__)
_GRADSMITH_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclass
class Evaluation:
    """Outputs and ``J^T v`` (one gradient per differentiable input, zeros where unused)."""

    outs: list[torch.Tensor]
    grads: list[torch.Tensor]


def cotangents(session: Session, outs: list[torch.Tensor]) -> list[torch.Tensor]:
    """One seeded cotangent per differentiable output, in its dtype (same for every variant:
    it depends only on the output's position and shape)."""
    return [torch.randn(o.shape, generator=session.generator(71 + i), dtype=torch.float64)
            .to(device=o.device, dtype=o.dtype) for i, o in enumerate(outs)]


def leaves(session: Session, dtype: torch.dtype | None) -> list[torch.Tensor]:
    """Fresh leaves at the base point, converted to ``dtype`` (None: the working dtype)."""
    return [x.detach().to(dtype or x.dtype).requires_grad_(True)
            for x in session.subject.base()]


def evaluate(session: Session, call: Callable[..., Any] | None = None,
             dtype: torch.dtype | None = None, *, xs: list[torch.Tensor] | None = None,
             backward: Callable[[Callable[[], Any]], Any] | None = None,
             backward_salt: int = 7) -> Evaluation:
    """Run ``call(*args)`` (default: the target) and its backward with the session's cotangents.

    Args:
        session: the check session.
        call: replaces the target's callable (a compiled or exported version of it).
        dtype: dtype of the differentiable inputs and of the other floating arguments (None:
            the working dtype).
        xs: the leaves to differentiate (default: :func:`leaves`).
        backward: wraps the backward call (e.g. to run it under autocast); gets a thunk.
        backward_salt: offset of the random state backward starts from.

    Returns:
        Detached outputs and gradients (gradients in the inputs' dtype).
    """
    subject = session.subject
    xs = leaves(session, dtype) if xs is None else xs
    build_dtype = dtype if dtype is not None else subject.dtype
    args = subject.args.build([x.clone() for x in xs], build_dtype)
    if dtype is not None:
        args = modules_to(args, dtype)
    out = seeded(subject.seed, call or subject.target.call, *args)
    outs = subject.select(out)
    vs = cotangents(session, outs)

    def grad() -> tuple:
        # Seeded too: a backward that draws noise (intended gradient noise) draws the same.
        return seeded(subject.seed + backward_salt, torch.autograd.grad, outs, xs, vs,
                      allow_unused=True, materialize_grads=True)

    grads = list(backward(grad) if backward is not None else grad())
    return Evaluation([o.detach() for o in outs], [g.detach() for g in grads])


def modules_to(args: tuple, dtype: torch.dtype) -> tuple:
    """Copies of the ``nn.Module`` arguments (layers passed to a Function) in ``dtype``, so
    their parameters follow the inputs into float32; the user's modules are untouched. An
    invented stand-in that gives a weight matrix is copied into ``dtype`` the same way."""
    import copy

    from torch.utils._pytree import tree_map

    def convert(a: Any) -> Any:
        if isinstance(a, torch.nn.Module) and any(
                p.is_floating_point() and p.dtype != dtype for p in a.parameters()):
            return copy.deepcopy(a).to(dtype)
        if getattr(a, "_gradsmith_invented", False) and hasattr(a, "_gradsmith_to"):
            return a._gradsmith_to(dtype)  # a stand-in giving a weight: in the inputs' dtype
        return a

    return tree_map(convert, args)


def reference(session: Session) -> Evaluation:
    """The eager evaluation in the working dtype (cached): what every variant must match."""
    if "deploy_ref" not in session.cache:
        session.cache["deploy_ref"] = evaluate(session)
    return session.cache["deploy_ref"]


def replayable(session: Session) -> bool:
    """True when two eager evaluations from the same random state agree (cached).

    False for a Function that draws from numpy, Python's ``random`` or a private
    ``torch.Generator``, or reads state that changes between calls: the eager checks replay
    Python's and NumPy's global generators too, but a compiled or exported program draws from
    its own streams (or bakes one draw in), so a compiled, exported, autocast or torch.func run
    of such a Function cannot be compared with eager (every comparison would see another draw).
    The second evaluation therefore replays torch's generator only.
    """
    if "deploy_replayable" not in session.cache:
        try:
            want = reference(session)
            with torch_seed_only():
                again = evaluate(session)
        except Exception:  # noqa: BLE001 - the checks themselves report what fails
            session.cache["deploy_replayable"] = True
        else:
            session.cache["deploy_replayable"] = all(
                a.shape == b.shape and bool(torch.allclose(a, b, rtol=1e-9, atol=1e-12,
                                                           equal_nan=True))
                for a, b in zip(want.outs + want.grads, again.outs + again.grads))
    return session.cache["deploy_replayable"]


#: Value comparisons that are not marked by ``details["mismatches"]``.
_COMPARISONS = {"vmap-mismatch"}


def comparable_only(session: Session, found: list[Finding], check: str) -> list[Finding]:
    """``found`` without its value comparisons when the Function is not :func:`replayable`
    (what did not depend on the values, a graph break or an export error, stays), plus an
    info finding that says why (one per report; the matrix shows it in every column it
    concerns, as ``n/a`` where nothing else was found)."""
    if replayable(session):
        return found
    kept = [f for f in found if "mismatches" not in f.details and f.code not in _COMPARISONS]
    return kept + [Finding(
        "deploy-not-comparable", "info",
        "compile, export, autocast and torch.func (vmap) results are not compared with eager: "
        "two eager runs from the same torch random state already differ (numpy, Python "
        "random, a private torch.Generator, or state that changes between calls), so a "
        "difference there could be another draw",
        "draw random numbers from torch's default generator (torch.rand, torch.randn_like, "
        "...) so that runs can be replayed; see the nondeterministic-forward finding", check,
        details={"limitation": True})]


def relative_error(got: torch.Tensor, want: torch.Tensor) -> float:
    """``max |got - want| / max |want|`` (normwise; inf when shapes differ or NaN appears)."""
    if got.shape != want.shape:
        return float("inf")
    got, want = got.to(torch.float64), want.to(torch.float64)
    if got.numel() == 0:
        return 0.0
    finite = torch.isfinite(want)
    if not bool((torch.isfinite(got) == finite).all()):
        return float("inf")
    diff = (got - want).abs()[finite]
    if diff.numel() == 0:
        return 0.0
    scale = float(want.abs()[finite].max())
    err = float(diff.max())
    if scale == 0.0:
        return 0.0 if err == 0.0 else float("inf")
    return err / scale


def mismatches(session: Session, got: Evaluation, want: Evaluation,
               tol: float) -> list[tuple[str, str, float]]:
    """``(kind, label, error)`` for every output / gradient whose relative error exceeds tol."""
    subject = session.subject
    found = []
    for label, a, b in zip(subject.out_labels, got.outs, want.outs):
        err = relative_error(a, b)
        if not err <= tol:
            found.append(("output", label, err))
    for label, a, b in zip(subject.labels, got.grads, want.grads):
        err = relative_error(a, b)
        if not err <= tol:
            found.append(("gradient", label, err))
    return found


def describe(items: list[tuple[str, str, float]]) -> str:
    """``"gradient of x (relative error 1)"``, joined, for messages."""
    return ", ".join(f"{'the ' + kind if kind == 'output' else 'the gradient of'} {label} "
                     f"(relative error {err:.2g})" if kind == "gradient" else
                     f"{label} (relative error {err:.2g})" for kind, label, err in items)


def first_line(exc: BaseException, limit: int = 300) -> str:
    """``Type: first line of the message`` (long Dynamo messages cut to their first line)."""
    text = str(exc).strip().splitlines()
    line = text[0] if text else ""
    if len(line) > limit:
        line = line[:limit] + "..."
    return f"{type(exc).__name__}: {line}"


def user_frame(frames: list[Any]) -> tuple[str, int, str] | None:
    """The innermost frame outside torch and gradsmith: ``(file, line, source)``."""
    for frame in reversed(frames or []):
        name = str(getattr(frame, "filename", ""))
        if name.startswith(_TORCH_DIR) or name.startswith(_GRADSMITH_DIR) or not name:
            continue
        return name, int(getattr(frame, "lineno", 0) or 0), (getattr(frame, "line", "") or "")
    return None


def user_frame_of(exc: BaseException) -> tuple[str, int, str] | None:
    """The innermost user frame of an exception: Dynamo's ``real_stack`` (the traced user
    code) when it has one, else its traceback's."""
    import traceback

    for e in (exc, getattr(exc, "inner_exception", None)):
        stack = getattr(e, "real_stack", None)
        if stack:
            found = user_frame(list(stack))
            if found is not None:
                return found
    return user_frame(traceback.extract_tb(exc.__traceback__))


def root_cause(exc: BaseException) -> BaseException:
    """The exception a compiler wrapper (``BackendCompilerFailed``) carries inside."""
    inner = getattr(exc, "inner_exception", None)
    return inner if isinstance(inner, BaseException) else exc


@contextmanager
def quiet_dynamo() -> Iterator[None]:
    """Fresh Dynamo state in, fresh Dynamo state out, Dynamo's log warnings and the partial
    graphs that ``torch.export`` prints to stderr on failure muted.

    Resetting before and after keeps one Function's compiled frames, guards and recompile
    counters from leaking into the next one's verdict (every Function's ``apply`` shares one
    code object, so eight Functions would otherwise hit the recompile limit and run eagerly).
    """
    import torch._dynamo

    names = ("torch._dynamo", "torch._inductor", "torch.fx", "torch._functorch",
             "torch.export", "torch._export", "torch._subclasses", "torch.utils._sympy",
             "torch._guards")
    loggers = [logging.getLogger(n) for n in names]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL)
    torch._dynamo.reset()
    try:
        with redirect_stderr(io.StringIO()), no_trace_log(), no_guard_profiling():
            yield
    finally:
        torch._dynamo.reset()
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


@contextmanager
def no_guard_profiling() -> Iterator[None]:
    """Skip the guard-latency measurement Dynamo makes after each compile, for its metrics.

    It flushes the CPU caches before timing one guard evaluation: 40-60 ms of each compile of a
    small Function (15 % of the compile check), for a number only Dynamo's compile metrics and
    debug log show; the guards are built and checked as before. Restored afterwards; a torch
    without the hook is left as it is.
    """
    import torch._dynamo.guards as guards

    before = getattr(guards, "profile_guard_manager", None)
    if before is None:
        yield
        return
    guards.profile_guard_manager = _no_latency
    try:
        yield
    finally:
        guards.profile_guard_manager = before


def _no_latency(*_: Any) -> float:
    """What Dynamo's guard profiler returns: a latency in microseconds (none measured)."""
    return 0.0


@contextmanager
def no_trace_log() -> Iterator[None]:
    """Mute torch's structured trace log (``torch.__trace``) while gradsmith compiles and exports.

    That logger is always at DEBUG and never propagates; torch writes to it whenever it has a
    handler. pytest (>= 8.4) attaches its capture handlers to every non-propagating logger, so
    each failing test item would carry a hundred empty ``DEBUG torch.__trace`` lines from
    gradsmith's own compile and export. Its handlers are taken off for the duration and put
    back exactly as they were; a trace the user asked for (``TORCH_TRACE``) is kept.
    """
    trace = logging.getLogger("torch.__trace")
    before = list(trace.handlers)
    keep = [h for h in before if type(h).__name__ == "LazyTraceHandler"
            and getattr(h, "root_dir", None)]
    trace.handlers = keep
    try:
        yield
    finally:
        trace.handlers = before


@contextmanager
def importable(cls: type | None) -> Iterator[None]:
    """Make the Function's module importable by name while Dynamo traces it.

    Dynamo re-imports a Function's class from ``cls.__module__``; a module loaded from a file
    without a ``sys.modules`` entry (``importlib.util.spec_from_file_location``) cannot be,
    which would fail the compile for a reason that has nothing to do with the Function.
    """
    import inspect
    import sys
    import types

    name = getattr(cls, "__module__", None)
    if cls is None or not name or name in sys.modules:
        yield
        return
    stub = types.ModuleType(name)
    forward = getattr(cls, "forward", None)
    vars(stub).update(getattr(inspect.unwrap(forward), "__globals__", {}))  # its namespace
    setattr(stub, cls.__name__, cls)
    sys.modules[name] = stub
    try:
        yield
    finally:
        if sys.modules.get(name) is stub:
            del sys.modules[name]


def is_random(session: Session) -> bool:
    """True when forward or backward draws random numbers (two random states, different
    outputs or gradients)."""
    return forward_is_random(session) or backward_is_random(session)


def backward_is_random(session: Session) -> bool:
    """True when backward draws random numbers (gradient noise): two backward states differ."""
    if "deploy_random_backward" not in session.cache:
        other = evaluate(session, backward_salt=8)
        session.cache["deploy_random_backward"] = not all(
            torch.equal(a, b) for a, b in zip(reference(session).grads, other.grads))
    return session.cache["deploy_random_backward"]


def forward_is_random(session: Session) -> bool:
    """True when the forward draws random numbers (two random states, different outputs)."""
    if "deploy_random" not in session.cache:
        subject = session.subject
        base = subject.base()
        one = subject.select(subject.call([x.clone() for x in base], seed=subject.seed + 1))
        two = subject.select(subject.call([x.clone() for x in base], seed=subject.seed + 2))
        session.cache["deploy_random"] = not all(
            a.shape == b.shape and bool(torch.equal(a.detach(), b.detach()))
            for a, b in zip(one, two))
    return session.cache["deploy_random"]
