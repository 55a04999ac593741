"""Declared gradients: what backward is meant to return when it is not the forward's gradient.

Two ways to declare it, for the two kinds of intentional gradients:

- ``surrogate=g``: an *estimator*, the gradient of a different, differentiable function
  ``g(*args)`` (straight-through round/sign/clamp: ``lambda x: x``, ``lambda x:
  x.clamp(-1, 1)``). Backward must return ``g``'s autograd gradient.
- ``intended=h``: an *intended modification* that is the gradient of no function (clipping,
  sparsification, noise, gradient scaling or reversal): ``h(*args, *grad_outputs)`` returns
  what backward must return, one value per forward argument, exactly as backward does
  (``lambda x, alpha, grad: (-alpha * grad, None)`` for gradient reversal).

A surrogate is evaluated from forward's replayed random state, an intended function from
backward's, so a declared noisy gradient is compared draw for draw (see
:mod:`gradsmith.checker.stochastic` for a backward whose draws are meant to be right only on
average: ``unbiased=True``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from gradsmith._errors import GradsmithError
from gradsmith.checker import rng
from gradsmith.checker.arguments import as_real, from_real
from gradsmith.checker.inputs import flatten_outputs
from gradsmith.checker.subject import seeded


class DeclarationError(Exception):
    """The declaration itself raised or returned something unusable; message says what."""


def validate(name: str, surrogate: Any, intended: Any, opts: Any) -> None:
    """Reject unusable declarations before anything runs.

    Raises:
        GradsmithError: both given, or one that is not callable.
    """
    if surrogate is not None and intended is not None:
        raise GradsmithError(
            f"check: {name} got both surrogate= and intended=; declare one: surrogate= for an "
            "estimator (backward is the gradient of that function), intended= for a "
            "modification that is the gradient of no function (clipping, noise, scaling)")
    for value, key, example in ((surrogate, "surrogate", "lambda x: x.clamp(-1, 1)"),
                                (intended, "intended", "lambda x, grad: grad.clamp(-1, 1)")):
        if value is not None and not callable(value):
            raise GradsmithError(f"check: {key} must be a callable, got "
                                 f"{type(value).__name__}; e.g. {key}={example}")


def declared_kind(session: Any) -> str | None:
    """``"surrogate"``, ``"intended"`` or None."""
    if session.surrogate is not None:
        return "surrogate"
    return "intended" if session.intended is not None else None


def reference(session: Any, seed: int | None = None
              ) -> Callable[[list[torch.Tensor], list[torch.Tensor]], list[torch.Tensor]]:
    """``(xs, vs) -> gradients`` of the declaration, one per differentiable input.

    ``xs`` are values of the differentiable inputs (working dtype), ``vs`` one incoming
    gradient per differentiable output. Raises :class:`DeclarationError` when the
    declaration raises or returns something that does not fit the Function.
    """
    subject = session.subject
    if session.surrogate is not None:  # replaces forward: forward's random state
        seed = subject.seed if seed is None else seed
        return lambda xs, vs: _surrogate_vjp(session, session.surrogate, xs, vs, seed)
    seed = subject.backward_seed if seed is None else seed  # replaces backward: backward's
    return lambda xs, vs: _intended(session, xs, vs, seed)


def _surrogate_vjp(session, surrogate, xs, vs, seed) -> list[torch.Tensor]:
    subject = session.subject
    with torch.enable_grad():
        leaves = [x.detach().requires_grad_(True) for x in xs]
        args = subject.build([x.clone() for x in leaves])
        try:
            out = seeded(seed, surrogate, *args)
        except Exception as exc:  # noqa: BLE001 - user code
            raise DeclarationError(f"the surrogate raised {type(exc).__name__}: {exc}"
                                   f"{_placeholder(exc)}") from None
        if not _tensors(out):
            raise DeclarationError(f"the surrogate returned {_what(out)}")
        outs = [as_real(out)] if isinstance(out, torch.Tensor) else subject.select(out)
        shapes = [tuple(o.shape) for o in outs]
        want = [tuple(v.shape) for v in vs]
        if shapes != want:
            raise DeclarationError(
                f"the surrogate returns outputs shaped {shapes}, the Function's "
                f"differentiable outputs are shaped {want}")
        pairs = [(o, v.to(o.dtype)) for o, v in zip(outs, vs) if o.requires_grad]
        if not pairs:
            return [torch.zeros_like(x) for x in xs]
        grads = torch.autograd.grad([o for o, _ in pairs], leaves, [v for _, v in pairs],
                                    allow_unused=True)
    return [torch.zeros_like(x) if g is None else g.detach() for g, x in zip(grads, xs)]


def _intended(session, xs, vs, seed) -> list[torch.Tensor]:
    subject = session.subject
    args = subject.build([x.detach().clone() for x in xs])
    incoming = grad_outputs(session, vs)
    try:
        with torch.no_grad():
            result = seeded(seed, session.intended, *args, *incoming)
    except Exception as exc:  # noqa: BLE001 - user code
        raise DeclarationError(f"intended raised {type(exc).__name__}: {exc}"
                               f"{_placeholder(exc)}") from None
    if result is Ellipsis or (isinstance(result, (tuple, list)) and Ellipsis in result):
        raise DeclarationError(f"intended returned {_what(result)}")
    result = result if isinstance(result, (tuple, list)) else (result,)
    if len(result) != len(args):
        raise DeclarationError(
            f"intended returned {len(result)} value(s) but forward takes {len(args)} "
            "argument(s): return one per forward argument, like backward (None where there "
            "is no gradient)")
    grads = []
    for k, x in enumerate(xs):
        pos = subject.args.position(k)
        if pos is None:
            raise DeclarationError(
                f"intended= cannot give the gradient of {subject.labels[k]} (nested in an "
                "argument, or a module parameter): declare a surrogate= instead")
        g = result[pos]
        if g is None:
            grads.append(torch.zeros_like(x))
            continue
        g = as_real(g) if isinstance(g, torch.Tensor) else g
        if not isinstance(g, torch.Tensor):
            raise DeclarationError(f"intended returned a {type(g).__name__} for "
                                   f"{subject.labels[k]}; expected a tensor or None")
        if g.shape != x.shape:
            try:
                g = g.sum_to_size(x.shape)
            except RuntimeError:
                raise DeclarationError(
                    f"intended returned shape {tuple(g.shape)} for {subject.labels[k]}, "
                    f"whose shape is {tuple(x.shape)}") from None
        grads.append(g.detach().to(x.dtype))
    return grads


def _tensors(out: Any) -> bool:
    """True for a tensor, or a tuple/list holding one (the shapes of a Function's outputs)."""
    if isinstance(out, torch.Tensor):
        return True
    return isinstance(out, (tuple, list)) and any(isinstance(o, torch.Tensor) for o in out)


def _what(value: Any) -> str:
    if value is Ellipsis or (isinstance(value, (tuple, list)) and Ellipsis in value):
        return ("`...` (Ellipsis): the declaration is a placeholder, as gradsmith prints it "
                "when it cannot write the line itself; complete it")
    what = "None" if value is None else f"a {type(value).__name__}"
    return f"{what}, not tensors shaped like the Function's outputs"


def _placeholder(exc: BaseException) -> str:
    if isinstance(exc, NotImplementedError):
        return " (the declaration is a template: complete it)"
    return ""


def describe(fn: Any) -> str:
    """Where a declaration was written (``file.py:12``), for messages that name it."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return repr(fn)
    import os

    return f"{os.path.basename(code.co_filename)}:{code.co_firstlineno}"


def grad_outputs(session: Any, vs: list[torch.Tensor]) -> list[torch.Tensor | None]:
    """One incoming gradient per output of forward, as backward receives them: the given
    ones for differentiable outputs, zeros for other tensors, None for non-tensors."""
    subject = session.subject
    if "flat_outputs" not in session.cache:
        with torch.no_grad():
            out = subject.call([x.clone() for x in subject.base()])
        session.cache["flat_outputs"] = [
            None if o is None else torch.zeros_like(o) for o in flatten_outputs(out)]
    flat = list(session.cache["flat_outputs"])
    for pos, v in zip(subject.out_pos, vs):
        flat[pos] = from_real(v) if flat[pos].is_complex() else v
    return flat


def uses_rng(session: Any) -> bool:
    """True when the declared gradient depends on the random state (declared noise)."""
    if declared_kind(session) is None:
        return False
    problem = session.problem
    problem.linearize()
    gen = rng.generator(5)
    vs = [torch.randn(s, generator=gen, dtype=torch.float64).to(problem.xs[0].dtype)
          for s in problem.out_shapes]
    try:
        a = reference(session, 1234)(problem.xs, vs)
        # several states: a declared sampler can draw the same sample twice by chance
        for seed in (98765, *range(3000, 3006)):
            b = reference(session, seed)(problem.xs, vs)
            if not all(torch.equal(x, y) for x, y in zip(a, b)):
                return True
    except DeclarationError:
        return False
    return False
