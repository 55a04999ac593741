"""Build example inputs for a candidate that has none registered, by probing its signature.

Parameters with defaults keep them. Hyperparameters recognised by name (``dim``, ``stride``,
``clip_val``, ...) get a plain Python value; every other parameter gets a float64 tensor that
requires grad. A few shape layouts (same shape, matmul chain, linear, broadcast bias, conv1d,
...) are tried in turn; the first whose forward runs wins. Nothing is guessed beyond that: a
Function whose forward accepts none of them is reported as skipped, with the fix.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# Hyperparameters whose natural value is not a tensor, by conventional name.
_INT_VALUES = {"dim": -1, "axis": -1, "stride": 1, "dilation": 1, "groups": 1, "padding": 0,
               "kernel_size": 3, "num_bits": 8, "bits": 8, "k": 1, "n": 2, "chunks": 2,
               "repeats": 2, "num_groups": 1, "num_heads": 1, "heads": 1,
               "ignore_index": -100, "zero_point": 0, "quant_min": -128, "quant_max": 127}
_STR_VALUES = {"reduction": "mean"}
_BOOL_VALUES = {"training": False, "inplace": False, "keepdim": False, "causal": False,
                "transpose": False, "hard": False, "largest": True, "descending": False}
_FLOAT_VALUES = {"alpha": 0.5, "eps": 1e-6, "clip_val": 2.0, "threshold": 0.5, "lambd": 0.5,
                 "scale": 2.0, "temperature": 0.5, "tau": 0.5, "p": 0.5, "min": -1.0,
                 "max": 1.0, "min_val": -1.0, "max_val": 1.0, "lower": -1.0, "upper": 1.0,
                 "negative_slope": 0.1, "momentum": 0.1, "factor": 2.0, "margin": 1.0,
                 "lr": 0.1, "weight_decay": 0.01, "dropout": 0.0, "dropout_p": 0.0,
                 "step": 0.1, "delta": 0.1, "sigma": 1.0, "smoothing": 0.1}

# Shape layouts for the tensor parameters, in the order tried; shorter lists repeat their last.
_LAYOUTS: tuple[tuple[tuple[int, ...], ...], ...] = (
    ((3, 4),),                               # elementwise, reductions
    ((4, 3), (3, 5), (5, 2)),                # matmul chain
    ((4, 3), (5, 3), (5,)),                  # linear: input, weight (out, in), bias
    ((2, 3, 4, 5), (3,)),                    # per-channel bias
    ((2, 3, 8), (4, 3, 3), (4,)),            # conv1d: input, weight, bias
    ((2, 3, 6, 6), (4, 3, 3, 3), (4,)),      # conv2d: input, weight, bias
    ((2, 4, 3), (2, 3, 5)),                  # batched matmul
    ((2, 3, 4),),
    ((5,),),
    ((),),
)


@dataclass(frozen=True)
class Synthesized:
    """Inputs that made the forward run, and how they were made (for the report)."""

    args: tuple
    description: str


@dataclass(frozen=True)
class NoInputs:
    """Why no inputs could be synthesised, phrased with the fix."""

    reason: str


def synthesize(fn: Any, seed: int = 0) -> Synthesized | NoInputs:
    """Find positional inputs on which ``fn`` (a Function class or callable) runs forward.

    Args:
        fn: a ``torch.autograd.Function`` subclass or a callable of tensors.
        seed: seed of the random tensors.

    Returns:
        :class:`Synthesized` on success, :class:`NoInputs` with the reason and fix otherwise.

    Example:
        >>> import torch
        >>> found = synthesize(lambda x, dim: x.sum(dim))
        >>> found.description
        'x: float64 (3, 4), dim=-1'
    """
    import torch

    call, params = _signature(fn)
    if params is None:
        return NoInputs(_fix(fn, "its forward signature cannot be inspected"))
    last_error = "no layout tried"
    for layout in _LAYOUTS:
        # Standard normal values first; positive ones (0.5 to 1.5) when the output is not
        # finite, for forwards defined on a positive domain only (log, sqrt, pow, ...).
        for positive in (False, True):
            args, parts = _build(params, layout, torch.Generator().manual_seed(seed), positive)
            try:
                with torch.enable_grad():
                    out = call(*args)
            except Exception as exc:  # the probe failing is expected; try the next layout
                last_error = f"{type(exc).__name__}: {_first_line(exc)}"
                break
            if not _has_float_tensor(out):
                last_error = f"forward returned {type(out).__name__}, not a floating-point tensor"
                break
            if _all_finite(out) or positive:
                # Fresh copies: the probe may have modified its inputs, the check must see it.
                args, parts = _build(params, layout, torch.Generator().manual_seed(seed),
                                     positive)
                return Synthesized(tuple(args), ", ".join(parts))
    return NoInputs(_fix(fn, f"{len(_LAYOUTS)} input layouts failed (last: {last_error})"))


def _first_line(exc: BaseException) -> str:
    text = str(exc)
    return text.splitlines()[0] if text else ""


def _all_finite(out: Any) -> bool:
    import torch

    items = out if isinstance(out, (tuple, list)) else (out,)
    return all(bool(torch.isfinite(t).all()) for t in items
               if isinstance(t, torch.Tensor) and t.is_floating_point())


def _signature(fn: Any) -> tuple[Callable[..., Any], list[inspect.Parameter] | None]:
    from gradsmith.discovery.collect import is_function_class

    if is_function_class(fn):
        target, call = fn.forward, fn.apply
    else:
        target, call = fn, fn
    try:
        params = list(inspect.signature(target).parameters.values())
    except (TypeError, ValueError):
        return call, None
    if is_function_class(fn) and not _is_modern(fn) and params:
        params = params[1:]  # ctx
    return call, params


def _is_modern(cls: type) -> bool:
    from torch.autograd import Function

    return cls.setup_context is not Function.setup_context


def _build(params: list[inspect.Parameter], layout, generator,
           positive: bool = False) -> tuple[list, list[str]]:
    import torch

    args: list = []
    parts: list[str] = []
    n_tensors = 0
    for p in params:
        if p.kind in (p.VAR_KEYWORD, p.KEYWORD_ONLY):
            continue
        if p.kind is p.VAR_POSITIONAL:
            count = 1
        elif p.default is not p.empty:
            args.append(p.default)
            parts.append(f"{p.name}={p.default!r}")
            continue
        else:
            value = _hyperparameter(p.name)
            if value is not None:
                args.append(value)
                parts.append(f"{p.name}={value!r}")
                continue
            count = 1
        for _ in range(count):
            shape = layout[min(n_tensors, len(layout) - 1)]
            n_tensors += 1
            if positive:
                value = torch.rand(shape, dtype=torch.float64, generator=generator) + 0.5
            else:
                value = torch.randn(shape, dtype=torch.float64, generator=generator)
            args.append(value.requires_grad_())
            parts.append(f"{p.name}: float64 {tuple(shape)}{' in [0.5, 1.5)' if positive else ''}")
    return args, parts


def _hyperparameter(name: str) -> Any:
    for table in (_INT_VALUES, _BOOL_VALUES, _FLOAT_VALUES, _STR_VALUES):
        if name in table:
            return table[name]
    return None


def _has_float_tensor(out: Any) -> bool:
    import torch

    items = out if isinstance(out, (tuple, list)) else (out,)
    return any(isinstance(t, torch.Tensor) and t.is_floating_point() for t in items)


def _fix(fn: Any, why: str) -> str:
    name = getattr(fn, "__name__", type(fn).__name__)
    where = f"class {name}" if isinstance(fn, type) else f"def {name}"
    return (f"no registered example and no inputs could be synthesised: {why}. Fix: register "
            f"inputs, e.g. `@gradsmith.example(lambda: (torch.randn(4, 3, dtype=torch.float64,"
            f" requires_grad=True),))` above `{where}`")
