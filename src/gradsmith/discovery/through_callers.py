"""Inputs for a Function as its project's own callers pass them (private).

Run only where synthesis for the Function found nothing (it would be a skip): each caller
:mod:`~gradsmith.discovery.callers` finds (a plain wrapper, then a Module) gets inputs from the
usual synthesis for plain functions, and is then called once more with ``Fn.apply`` replaced by
a recorder. The recorder keeps the exact arguments of the first call and stops the caller with
a private exception, so nothing after it runs (a loss, an in-place update of the Module's
state); ``apply`` and every alias of it are restored whatever happens. The recorded arguments,
tensors detached and cloned (floating ones requiring grad, except where backward returns None
by design), are the Function's input set; each variant of the caller's inputs gives one more.
The Function must then run forward (and backward) on them like any synthesised set: the check's
usual exercised / non-trivial rules apply to the result, so a caller that never reaches backward
cannot turn a skip into a PASS.
"""

from __future__ import annotations

import inspect
import itertools
import time
from typing import Any

from gradsmith.discovery.backward_reads import no_gradient_positions
from gradsmith.discovery.callers import Caller, callers_of
from gradsmith.discovery.layout_search import NoInputs, Synthesized
from gradsmith.discovery.module_callers import module_calls
from gradsmith.discovery.probe import backward_error, probe
from gradsmith.discovery.variants import Variant

#: Callers, and syntheses in all (a Module is tried with a few constructor sizes), at most:
#: each synthesis that fails costs every layout, on a path that ends in a skip anyway.
_MAX_CALLERS = 3
_MAX_TRIES = 4
#: Seconds after which no further caller is tried.
_BUDGET_S = 3.0


class _Recorded(BaseException):
    """Raised by the recorder once ``apply``'s arguments are kept: stops the caller there
    (a BaseException: a caller's ``except Exception`` fallback must not run on instead)."""


def through_callers(fn: type, seed: int,
                    skipped: NoInputs | Synthesized) -> Synthesized | NoInputs:
    """Inputs for ``fn`` recorded from its project's callers, or ``skipped``: no inputs (its
    reason then names the callers tried, so the user knows registering inputs is still the
    fix), or synthesised ones on which backward raised with a kind guessed (their doubt makes
    the row a skip; a caller's clean set replaces them, nothing else does).

    A set on which backward raises is returned only when no caller gives a clean one and
    there were no inputs at all, and then with the error as its doubt (the row stays a skip
    unless the error is shown to be the Function's, as for any synthesised set).
    """
    from gradsmith.discovery.synthesize import synthesize

    raising: Synthesized | None = None
    tried: list[str] = []
    start = time.perf_counter()
    tries = (built for caller in callers_of(fn)[:_MAX_CALLERS] for built in _callables(caller))
    for call, text in itertools.islice(tries, _MAX_TRIES):
        if time.perf_counter() - start > _BUDGET_S:
            break  # the user's callers are slow to build or run: the skip stands
        tried.append(f"`{text}`")
        try:  # the caller's synthesis failing is no finding: the Function's skip stands
            found = synthesize(call, seed)
        except Exception:  # noqa: BLE001
            continue
        if not isinstance(found, Synthesized):
            continue
        args = record(fn, call, found.args)
        if args is None or probe(fn.apply, list(args)) is not True:
            continue
        source = f"as `{text}` passes them ({found.description})"
        variants = tuple(v for v in (*(_variant(fn, call, v) for v in found.variants),
                                     moved_state(fn, args, source, seed)) if v)
        raised = backward_error(fn.apply, args)
        if raised is None:
            return Synthesized(args, source, variants, seed)
        raising = raising or Synthesized(args, source, variants, seed, doubt=raised)
    if isinstance(skipped, Synthesized) or not tried:
        return skipped
    if raising is not None:
        return raising
    return NoInputs(f"{skipped.reason} (the project's callers were tried too: "
                    f"{', '.join(tried)} gave no inputs on which it runs)")


def record(fn: type, call, args: tuple) -> tuple | None:
    """The arguments ``call(*args)`` passes to ``fn.apply`` first, as a fresh input set, or
    None when it never calls it (or fails before)."""
    kept: list[tuple] = []

    def recorder(*given, **named):
        kept.append(_positional(fn, given, named))
        raise _Recorded

    restore = _patch(fn, call, recorder)
    try:
        call(*_fresh(args))
    except _Recorded:
        pass
    except Exception:  # noqa: BLE001 - the caller's own failure: no recorded set
        return None
    finally:
        restore()
    if not kept or kept[0] is None:
        return None
    return _inputs(fn, kept[0])


def _patch(fn: type, call, recorder):
    """Replace ``fn.apply`` and the aliases in the caller's globals; returns the undo."""
    had = "apply" in vars(fn)
    old = vars(fn).get("apply")
    bound = fn.apply
    fn.apply = staticmethod(recorder)
    namespace = getattr(inspect.unwrap(getattr(call, "__func__", call)), "__globals__", {})
    aliases = [k for k, v in list(namespace.items()) if _same_apply(v, bound)]
    for key in aliases:
        namespace[key] = recorder

    def restore():
        if had:
            fn.apply = old
        else:
            del fn.apply
        for key in aliases:
            namespace[key] = bound
    return restore


def _same_apply(value: Any, bound: Any) -> bool:
    return getattr(value, "__self__", None) is getattr(bound, "__self__", ()) and \
        getattr(value, "__func__", None) is getattr(bound, "__func__", ())


def _positional(fn: type, given: tuple, named: dict) -> tuple | None:
    if not named:
        return given
    try:  # apply(x, scale=2): bound to forward's parameters after ctx
        params = list(inspect.signature(fn.forward).parameters)[1:]
        return tuple(inspect.signature(fn.forward).bind(None, *given, **named).arguments[p]
                     for p in params)
    except (TypeError, ValueError, KeyError):
        return None


def _inputs(fn: type, given: tuple) -> tuple:
    """Tensors detached and cloned; floating ones require grad unless backward returns
    None for their position by design (as synthesis does)."""
    import torch

    frozen = no_gradient_positions(fn)
    out = []
    for i, value in enumerate(given):
        if isinstance(value, torch.Tensor):
            value = value.detach().clone()
            if value.is_floating_point() and i not in frozen and not value.is_sparse:
                value.requires_grad_(True)
        out.append(value)
    return tuple(out)


def _fresh(args: tuple) -> tuple:
    import torch

    return tuple(a.detach().clone().requires_grad_(a.requires_grad)
                 if isinstance(a, torch.Tensor) and a.is_leaf else a for a in args)


def _variant(fn: type, call, variant: Variant) -> Variant | None:
    args = record(fn, call, variant.args)
    if args is None or probe(fn.apply, list(args)) is not True:
        return None
    return Variant(args, variant.description, f"{variant.change} (through the caller)")


def moved_state(fn: type, args: tuple, source: str, seed: int) -> Variant | None:
    """The recorded set with the Module's state vectors scaled elementwise by U(0.5, 1.5):
    a Module passes its state at its initial values (variances 1, means 0), where a backward
    that drops a factor of it is right by accident. Only floating scalars and vectors move,
    never one whose structure the scaling would break (a grid or knots, strictly monotonic; a
    probability vector; a unit vector), nor a matrix (symmetric, orthogonal, an inverse of
    another), nor whole numbers that may be counts (a single one, or several that differ;
    a vector of ones moves): signs and zeros are kept. Kept only when forward runs on it."""
    import torch

    generator = torch.Generator().manual_seed(seed + 1)
    moved, changed = [], False
    for value in args:
        if _movable(value):
            scale = 0.5 + torch.rand(value.shape, generator=generator, dtype=value.dtype)
            value = (value.detach() * scale).requires_grad_(value.requires_grad)
            changed = changed or bool(value.detach().any())  # zeros stay zeros
        moved.append(value)
    if not changed or probe(fn.apply, list(moved)) is not True:
        return None
    return Variant(tuple(moved), source, "the caller's state vectors scaled elementwise by "
                   "U(0.5, 1.5) (away from their initial values)")


def _movable(value: Any) -> bool:
    import torch

    if not (isinstance(value, torch.Tensor) and value.is_floating_point()
            and value.dim() <= 1 and value.numel() and not value.is_sparse):
        return False
    flat = value.detach().reshape(-1)
    if bool((flat == flat.round()).all()) and not bool((flat == flat[0]).all()):
        return False  # whole numbers that differ: counts, lengths, indices as floats
    if flat.numel() == 1:
        return not float(flat[0]).is_integer()  # a count, stride or flag stays whole
    steps = flat.diff()
    if bool((steps > 0).all()) or bool((steps < 0).all()):
        return False  # a grid, knots, a (seen, total) pair
    if bool((flat >= 0).all()) and abs(float(flat.sum()) - 1.0) < 1e-6:
        return False  # probabilities
    return abs(float(flat.norm()) - 1.0) > 1e-6  # a unit vector stays one


def _callables(caller: Caller) -> list:
    """What to synthesise for: the function itself, or a Module's ``forward`` on instances
    built with a few constructor values (see :mod:`~gradsmith.discovery.module_callers`)."""
    if not caller.is_module:
        return [(caller.obj, f"{caller.name}({_params(caller.obj)})")]
    return module_calls(caller.name, caller.obj)


def _params(obj) -> str:
    try:
        params = inspect.signature(obj).parameters.values()
    except (TypeError, ValueError):
        return "..."
    stars = {inspect.Parameter.VAR_POSITIONAL: "*", inspect.Parameter.VAR_KEYWORD: "**"}
    return ", ".join(stars.get(p.kind, "") + p.name for p in params)
