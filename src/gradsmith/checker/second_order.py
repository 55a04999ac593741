"""Point 2: double backward, unless backward is ``@once_differentiable``.

The backward is treated as a function ``G(x, v) = J(x)^T v`` of the inputs *and* the incoming
gradient. Its autograd derivative (the double-backward graph) is compared with finite
differences of ``G`` itself, by the same numerics as first order. This catches the silent
failures gradgradcheck users hit: intermediates computed in forward and saved (no graph back
to the inputs), ``.detach()``/``.data``/numpy inside backward, and NaN second derivatives.
"""

from __future__ import annotations

import inspect

import torch

from gradsmith.checker import costly, declared, gradients, kernels, reported, unsupported
from gradsmith.checker.graph import graph_nodes
from gradsmith.checker.inputs import is_once_differentiable
from gradsmith.checker.problem import Problem, seeded_grad
from gradsmith.checker.report import Finding
from gradsmith.checker.session import Incomplete, Session, Skip

NAME = "second_order"


def backward_problem(session: Session) -> Problem:
    """``(x..., v...) -> J(x)^T v`` as a :class:`Problem`, differentiable by autograd."""
    subject = session.subject
    xs = subject.base()
    k = len(xs)
    first = session.problem
    first.linearize()
    gen = session.generator(11)
    vs = [torch.randn(shape, generator=gen, dtype=torch.float64).to(xs[0].dtype)
          for shape in first.out_shapes]

    def f(inputs: list[torch.Tensor], fresh: set[int]) -> list[torch.Tensor]:
        with torch.enable_grad():
            leaves = [x if x.requires_grad else x.detach().requires_grad_(True)
                      for x in inputs[:k]]
            outs = subject.select(subject.call([x.clone() for x in leaves]))
            pairs = [(o, g) for o, g in zip(outs, inputs[k:]) if o.requires_grad]
            # Replayed random state: a backward that draws samples is the same function of
            # (x, v) in every finite difference, and the same draw an intended= replays.
            grads = seeded_grad(subject.backward_seed, [o for o, _ in pairs], leaves,
                                [g.clone() for _, g in pairs], create_graph=True,
                                allow_unused=True)
        return [torch.zeros_like(x) if g is None else g for g, x in zip(grads, leaves)]

    labels = [*subject.labels, *(f"grad_{o}" for o in subject.out_labels)]
    out_labels = [f"grad_{label}" for label in subject.labels]
    complex_in = subject.complex_inputs | {k + len(xs) for k in subject.complex_outputs}
    return Problem(f, [*xs, *vs], labels, out_labels, complex_inputs=complex_in,
                   complex_outputs=subject.complex_inputs, backward_seed=subject.backward_seed)


# First-order findings that make second order an echo: double backward differentiates the same
# (wrong) backward, and through a saved output it runs that backward again.
FIRST_ORDER = ("gradient-mismatch", "nan-gradient", "surrogate-mismatch", "surrogate-error",
               "missing-param-grad", "reference-mismatch", "reference-error",
               "undeclared-estimator", "intended-mismatch", "intended-error", "gradient-quality",
               "biased-estimate")


def run(session: Session) -> list[Finding]:
    wrong = sorted({f"{f.code} on {f.input}" if f.input else f.code
                    for f in session.report.findings if f.code in FIRST_ORDER and f.is_error})
    if wrong:
        raise Skip(f"first-order gradients are wrong ({', '.join(wrong)}); second order "
                   "differentiates that backward and would only echo it: fix first order, "
                   "then second order is checked")
    if is_once_differentiable(session.function_cls):
        raise Skip("backward is @once_differentiable (double backward raises, as intended)")
    inner = _once_differentiable_in_graph(session)
    if inner is not None:
        raise Skip(f"the graph contains {inner}, whose backward is @once_differentiable "
                   "(double backward raises, as intended)")
    if reported.known(unsupported.CODE, None) and kernels.backward_cause(session) is not None:
        # interpreted kernels make each double-backward comparison seconds long; the set
        # can only repeat that the kernels' gradient has no graph (corpus 13's fused router
        # ran out of its 120 s on the fifth set's second order)
        raise Skip("an earlier input set showed that backward's Triton kernels give autograd "
                   "no graph to differentiate (double-backward-unsupported): this set would "
                   "repeat it")
    problem = backward_problem(session)
    try:
        problem.linearize()
    except Exception as exc:  # noqa: BLE001
        return [_crash(exc, session.function_cls)]
    # A random backward declared unbiased=True: one draw's derivative is not the declaration's
    # (that holds on average only), so the replayed draw is differentiated against finite
    # differences of that same draw (backward's random state is replayed in both).
    kind = None if session.options.unbiased else declared.declared_kind(session)
    if kind is not None:
        problem = _AgainstDeclared(problem, session)
        try:
            problem.value()
        except declared.DeclarationError as err:
            raise Incomplete(f"the declared {kind} cannot be evaluated ({err}): second order "
                             f"is judged against the {kind}, not the real forward") from None
    quick = None if kind is not None else kernels.kernel_double_backward(session, problem)
    if quick is not None:
        return quick
    try:
        # Backward's result in a lower precision (.float()): its finite differences need
        # that precision's step, as forward's do in low-precision mode.
        with gradients.returned_precision(session):
            results = gradients.compare(session, problem, NAME)
    except Exception as exc:  # noqa: BLE001 - double backward crashing is a finding
        return [_crash(getattr(exc, "exc", None) or exc, session.function_cls)]
    findings = []
    for res in results:
        findings += gradients.findings_for(session, problem, res, NAME, kind="double-backward")
    # After verified first order, any mismatch means autograd does not see part of backward's
    # dependence on an input (0 or a part of the derivative): one warning (see unsupported).
    kernel = kernels.backward_cause(session)
    findings = unsupported.split(session, problem, findings, kernel or _cause(
        session.function_cls), {"cause": "kernel-backward"} if kernel else None,
        in_message=kernel is not None)
    against = {"surrogate": "the surrogate's second derivative (finite differences of its "
                            "gradient)",
               "intended": "finite differences of the declared intended gradient"}.get(
        kind, "finite differences")
    inner = _inner_estimator(session, problem) if kind is not None and findings else None
    for f in findings:
        if f.code == unsupported.CODE and kind is not None:
            f.message = f.message.replace("finite differences", against, 1)
            if inner is not None:
                _estimator_inside(f, inner, kind)
    if (cost := session.cache.get(costly.KEY)) is not None:  # probed within a time budget
        findings.append(costly.finding(cost, NAME))
    return findings


class _AgainstDeclared(Problem):
    """The Function's double backward (analytic) against finite differences of the declared
    gradient (surrogate= or intended=), not of the real forward: an estimator's forward is
    flat, its backward is defined by the declaration, and so is that backward's derivative."""

    def __init__(self, analytic: Problem, session: Session):
        k = len(session.subject.labels)
        ref = declared.reference(session)

        def f(inputs: list[torch.Tensor], fresh: set[int]) -> list[torch.Tensor]:
            return ref(list(inputs[:k]), list(inputs[k:]))

        super().__init__(f, analytic.xs, analytic.labels, analytic._out_labels)
        self._analytic = analytic

    def linearize(self):
        graph = self._analytic.linearize()
        self.out_shapes = self._analytic.out_shapes
        return graph

    def vjp(self, v: torch.Tensor) -> list[torch.Tensor]:
        return self._analytic.vjp(v)


def _inner_estimator(session: Session, problem: Problem) -> str | None:
    """The name of a straight-through Function that backward itself applies (LSQ's backward
    rounds with ``Round.apply``), or None: its own backward passes the gradient through a
    flat forward, so differentiating backward runs an estimator of its own."""
    analytic = getattr(problem, "_analytic", problem)
    try:
        _, outs = analytic.linearize()
    except Exception:  # noqa: BLE001 - reported by the comparison already
        return None
    own = session.function_cls
    return _function_in_graph(outs, lambda cls: cls is not own and _straight_through(cls))


def _function_in_graph(outs, wanted) -> str | None:
    """The name of the first custom Function in the graph behind ``outs`` for which
    ``wanted(cls)`` holds, or None."""
    for node in graph_nodes(outs):
        cls = getattr(node, "_forward_cls", None)
        if cls is not None and wanted(cls):
            return cls.__name__
    return None


def _straight_through(cls: type) -> bool:
    """A one-tensor Function whose forward is flat at every element of a sample while its
    backward passes a gradient (round, floor, sign passed straight through)."""
    x = torch.linspace(-2.9, 3.1, 13, dtype=torch.float64, requires_grad=True)
    try:
        with torch.enable_grad():
            y = cls.apply(x)
            (g,) = torch.autograd.grad(y, [x], torch.ones_like(y))
        with torch.no_grad():
            flat = torch.equal(cls.apply(x + 1e-7), cls.apply(x))
    except Exception:  # noqa: BLE001 - another signature: not a one-tensor estimator
        return False
    return flat and bool((g != 0).all())


def _estimator_inside(f: Finding, inner: str, kind: str) -> None:
    """The ``double-backward-unsupported`` warning of a backward that applies a
    straight-through Function, told why (which estimator a second derivative should use is
    not defined by the declaration: its finite differences see the rounding flat, while the
    inner Function's backward passes the gradient through)."""
    f.message += (f". Backward applies {inner}, a straight-through Function, to compute its "
                  f"result: differentiating backward runs {inner}'s own estimator, while "
                  f"finite differences of the declared {kind} see its rounding as flat; the "
                  "two second derivatives are different estimators, neither wrong for "
                  "first-order training")
    f.hint = (f"if second derivatives matter (Hessian-aware methods), compute backward's "
              f"rounding with torch.round instead of {inner}.apply, or decorate backward "
              f"with @once_differentiable; `--require {unsupported.REQUIRED_AS}` makes this "
              "fail")


# What in a backward's source cuts its graph, and how to say so.
_SUSPECTS = ((".detach(", "`.detach()`"), (".data", "`.data`"), ("numpy", "NumPy"),
             ("no_grad", "`torch.no_grad()`"), (".item(", "`.item()`"))


def _cause(cls: type | None) -> str:
    """Why backward's graph misses a dependence, naming only what backward really uses."""
    try:
        source = inspect.getsource(cls.backward) if cls is not None else ""
    except (OSError, TypeError):
        source = ""
    used = [name for token, name in _SUSPECTS if token in source]
    return (f"backward uses {', '.join(used)}, which autograd cannot differentiate through"
            if used else "backward's result depends on the inputs in a way its graph does "
            "not record: typically tensors computed in forward and saved as intermediates "
            "(they carry no graph back to the inputs)")


def _crash(exc: BaseException, cls: type | None) -> Finding:
    from gradsmith.checker.explain import describe, explain, user_frame

    text = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
    if "once_differentiable" in text:
        # A helper Function inside backward is @once_differentiable: double backward fails
        # loudly, which is the intended contract, not a silent error.
        raise Skip("double backward raises through an inner @once_differentiable Function")
    frame = user_frame(exc, cls)
    message = f"differentiating backward (double backward) raised {text}{describe(frame)}"
    hint = ("make backward differentiable (no in-place ops on saved tensors or grad_output, "
            "no numpy) or decorate it with @once_differentiable so users get a clear error")
    details: dict = {"exception": type(exc).__name__}
    if frame:
        details["where"] = frame
    known = explain(exc, "double backward")
    if known is not None:
        message += f". Cause: {known.cause}"
        hint = f"{known.fix}; or decorate backward with @once_differentiable"
        details["cause"] = known.key
    return Finding("double-backward-error", "warning", message + gradients.SECOND_ORDER_ONLY,
                   hint + unsupported.REQUIRE_HINT, NAME, details=details)


def _once_differentiable_in_graph(session: Session) -> str | None:
    """Name of a once-differentiable custom Function that a plain callable applies, if any.

    ``@once_differentiable`` installs its "differentiate twice" error only when an incoming
    gradient requires grad; differentiated with respect to the inputs alone, such a backward
    looks like a silent zero. So a callable wrapping one is treated like the Function itself.
    """
    if session.function_cls is not None:
        return None
    subject = session.subject
    try:
        with torch.enable_grad():
            leaves = [x.detach().requires_grad_(True) for x in subject.base()]
            outs = subject.select(subject.call([x.clone() for x in leaves]))
    except Exception:  # noqa: BLE001 - forward errors are reported by the gradients check
        return None
    return _function_in_graph(outs, is_once_differentiable)
