"""Build example inputs for a candidate that has none registered, by probing its signature.

What the forward's signature and body say comes first (:mod:`~gradsmith.discovery.hints`):
annotations, defaults, ``x.shape[2]``, ``x.view(-1, n)``, ``x @ w``, index tensors, string
modes, module arguments; and the contract the code is written for
(:mod:`~gradsmith.discovery.contract`): a hyperparameter forward stores on ctx or passes to
``float()`` is a Python float, a per-feature ``bias``/``weight`` whose gradient backward sums
is 1-D of the input's last dimension. Hyperparameters recognised by name (``dim``, ``stride``,
``clip_val``, ...) get a plain Python value; every other parameter gets a float64 tensor that requires grad. A
few shape layouts (same shape, matmul chain, linear, broadcast bias, conv1d, ...) are tried in
turn; the first whose forward runs wins. A function argument that forward only stores and
backward calls (``ctx.func(t, y)``, ``vjp(ctx.event_fn, (t, y))``) gets a plain
:class:`~gradsmith.discovery.callables.SyntheticFn`, and there the first layout (the ODE
convention, a scalar time before the state, first) and function flavour on which forward *and*
backward run wins: forward alone cannot tell whether invented functions fit.

One set of inputs hides bugs, so the winning set comes with **variants**, each kept only when
the forward runs on it: float hyperparameters at a non-default value (a backward that ignores
``beta`` is right at ``beta=1`` only), optional tensors both absent and present (``bias=None``
and a bias), and other shapes (sizes changed consistently, and a size-1 broadcast dimension).
A Function whose forward accepts nothing is reported as skipped, with a decorator that lists
every argument of its forward.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gradsmith.discovery.callables import SyntheticFn, flavours, probe_backward
from gradsmith.discovery.contract import per_feature_params, scalar_params
from gradsmith.discovery.hints import Hint, backward_functions, forward_hints, no_gradient_positions
from gradsmith.discovery.placement import place

# Hyperparameters whose natural value is not a tensor, by conventional name.
_INT_VALUES = {"dim": -1, "axis": -1, "stride": 1, "dilation": 1, "groups": 1, "padding": 0,
               "kernel_size": 3, "num_bits": 8, "bits": 8, "k": 1, "n": 2, "chunks": 2,
               "repeats": 2, "num_groups": 1, "num_heads": 1, "heads": 1,
               "ignore_index": -100, "zero_point": 0, "quant_min": -128, "quant_max": 127,
               "bitwidth": 8, "nbits": 4}
_STR_VALUES = {"reduction": "mean"}
_BOOL_VALUES = {"training": False, "inplace": False, "keepdim": False, "causal": False,
                "transpose": False, "hard": False, "largest": True, "descending": False}
_FLOAT_VALUES = {"alpha": 0.5, "eps": 1e-6, "clip_val": 2.0, "threshold": 0.5, "lambd": 0.5,
                 "scale": 2.0, "temperature": 0.5, "tau": 0.5, "p": 0.5, "min": -1.0,
                 "max": 1.0, "min_val": -1.0, "max_val": 1.0, "lower": -1.0, "upper": 1.0,
                 "negative_slope": 0.1, "momentum": 0.1, "factor": 2.0, "margin": 1.0,
                 "lr": 0.1, "weight_decay": 0.01, "dropout": 0.0, "dropout_p": 0.0,
                 "step": 0.1, "delta": 0.1, "sigma": 1.0, "smoothing": 0.1, "beta": 1.0,
                 "gamma": 1.0, "lambda_": 0.5}
# Names of parameters that are tensors even when their default is None.
_TENSOR_NAMES = {"bias", "weight", "mask", "attn_mask", "input", "x", "y", "target", "other",
                 "scale", "zero_point", "residual", "identity", "gate", "key_padding_mask"}
# Names of parameters that are modules or functions applied to tensors.
_CALLABLE_NAMES = {"fn", "func", "function", "module", "Fm", "Gm", "block",
                   "layer", "run_function"}
# Functions whose backward calls a function argument try the ODE convention early: a scalar
# time, then the state (``func(t, y)``, an event at time ``t``).
_TIME_STATE: tuple[tuple[int, ...], ...] = ((), (3, 4))
# Size map for the "other shapes" variant: equal sizes stay equal (matmul layouts stay valid).
_RESIZE = {1: 1, 2: 3, 3: 2, 4: 5, 5: 6, 6: 7, 8: 6}

# Shape layouts for the tensor parameters, in the order tried; shorter lists repeat their last.
_LAYOUTS: tuple[tuple[tuple[int, ...], ...], ...] = (
    ((3, 4),),                               # elementwise, reductions
    ((4, 3), (3, 5), (5, 2)),                # matmul chain
    ((4, 3), (5, 3), (5,)),                  # linear: input, weight (out, in), bias
    ((3, 4), ()),                            # tensor and a scalar tensor (scale, step)
    ((2, 3, 4, 5), (3,)),                    # per-channel bias
    ((2, 3, 8), (4, 3, 3), (4,)),            # conv1d: input, weight, bias
    ((2, 3, 6, 6), (4, 3, 3, 3), (4,)),      # conv2d: input, weight, bias
    ((2, 4, 3), (2, 3, 5)),                  # batched matmul
    ((2, 3, 4),),
    ((2, 2, 3, 4),),                         # (batch, heads, length, features)
    ((5,),),
    ((),),
    # Fused kernels (Triton): rows x a power-of-two hidden size; a linear layer (input, weight)
    # before a loss; rotary embeddings (q, k: batch, heads, length, head_dim; cos, sin:
    # 1, length, head_dim); a vector of per-term weights and a scalar (polynomial norms);
    # tensors with per-feature or per-channel vectors (normalisations whose host code checks
    # no shapes: a layout their backward rejects is passed over, see _first_working).
    ((4, 8),),
    ((4, 8), (16, 8)),
    ((1, 2, 4, 8), (1, 2, 4, 8), (1, 4, 8)),
    ((4, 8), (3,), ()),
    ((2, 3, 4), (4,)),                       # stacked rows and per-feature vectors
    ((2, 2, 4), (2,)),                       # (batch, channels, length), per-channel vectors
)
# Tensor parameters that, when every layout fails with floats, are tried as class indices
# (a loss's target read by a kernel, where no gather in forward's body says so).
_INDEX_NAMES = {"target", "targets", "label", "labels", "ids", "indices", "index", "token_ids",
                "shift_labels", "y"}


@dataclass(frozen=True)
class Variant:
    """Another set of inputs for the same forward, and what differs from the first set."""

    args: tuple
    description: str
    change: str


@dataclass(frozen=True)
class Synthesized:
    """Inputs that made the forward run, how they were made, and variants (for the report)."""

    args: tuple
    description: str
    variants: tuple[Variant, ...] = ()
    seed: int = 0


@dataclass(frozen=True)
class NoInputs:
    """Why no inputs could be synthesised, phrased with the fix."""

    reason: str


@dataclass
class _Slot:
    """How one positional parameter gets its value."""

    name: str
    kind: str                 # value | tensor | index | module | function | params | none
    value: Any = None
    hint: Hint | None = None
    optional_tensor: bool = False   # None by default, a tensor in a variant
    omittable: bool = False         # a tensor that may also be None (checked with `is None`)
    frozen: bool = False            # backward returns None for it: no requires_grad
    per_feature: bool = False       # 1-D of the first tensor's last dimension, tried first


def synthesize(fn: Any, seed: int = 0) -> Synthesized | NoInputs:
    """Find positional inputs on which ``fn`` (a Function class or callable) runs forward.

    Args:
        fn: a ``torch.autograd.Function`` subclass or a callable of tensors.
        seed: seed of the random tensors.

    Returns:
        :class:`Synthesized` (with its variants) on success, :class:`NoInputs` with the reason
        and a decorator to add otherwise.

    Example:
        >>> import torch
        >>> found = synthesize(lambda x, dim: x.sum(dim))
        >>> found.description
        'x: float64 (3, 4), dim=-1'
        >>> [v.change for v in found.variants]
        ['other shapes: x (2, 5)', 'size-1 dimension: x (1, 4)']
    """

    call, params, target = _signature(fn)
    if params is None:
        return NoInputs(_fix(fn, "its forward signature cannot be inspected", [], {}))
    hints = forward_hints(target, [p.name for p in params],
                          owner=fn if isinstance(fn, type) else None)
    last_error = "no layout tried"
    owner = fn if isinstance(fn, type) else None
    functions = backward_functions(owner, [p.name for p in params])
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    frozen = {positional[i] for i in no_gradient_positions(owner) if i < len(positional)}
    plans = [_plan(params, hints, True, functions), _plan(params, hints, False, functions)]
    scalars = scalar_params(owner, hints, frozen)
    features = per_feature_params(owner, hints)
    plans = [_contract(plan, scalars, features) for plan in plans]
    for plan in plans:
        for slot in plan:
            slot.frozen = slot.name in frozen
    paired = [p.name for p in params if "inverse" in p.name.lower()]
    if paired:  # an inverse must match its function: inventing one gives false failures
        return NoInputs(_fix(fn, f"{paired[0]!r} must be the inverse of another argument, "
                             "which cannot be synthesised", plans[-1], hints))
    # Tensors the body checks for None (`if exists(mask)`) are tried absent first, then present.
    # float32 last: some forwards crash in float64 (the check then says so, in float32).
    # Fallbacks, tried only after the usual plans: parameters without a default that the
    # hyperparameter table named (`k`, `p`, `n`) as tensors (rotary q/k, distributions p/q),
    # then target-like tensors as class indices.
    required = {p.name for p in params if p.default is p.empty}
    plans += [p for p in (_as_tensors(plan, required) for plan in list(plans)) if p]
    plans += [p for p in map(_as_index, list(plans)) if p is not None]
    for dtype in ("float64", "float32"):
        for slots in [p for i, p in enumerate(plans) if p not in plans[:i]]:
            found = _first_working(call, slots, seed, dtype)
            if isinstance(found, Synthesized):
                return found
            last_error = found if dtype == "float64" else last_error
    return NoInputs(_fix(fn, f"{len(_LAYOUTS)} input layouts failed (last: {last_error})",
                         plans[-1], hints))


def _contract(slots: list[_Slot], scalars: set[str], features: set[str]) -> list[_Slot]:
    """The plan with the contract the code is written for: parameters used as Python numbers
    get a float (``ctx.coef = coef``, ``float(bias_init)``), per-feature vectors a tensor that
    the first layouts make 1-D (``x + bias`` with backward ``g.sum(0)``)."""
    out = []
    for s in slots:
        if s.name in scalars and s.kind == "tensor":  # 0.5, 1.5, ...: pairs are open windows
            value = 0.5 + sum(o.name in scalars and o.kind == "value" for o in out)
            s = _Slot(s.name, "value", value, s.hint)
        elif s.name in features and s.kind in ("tensor", "value") and not (
                s.kind == "value" and not isinstance(s.value, float)):
            s = _Slot(s.name, "tensor", hint=s.hint, per_feature=True)
        out.append(s)
    return out


def _as_tensors(slots: list[_Slot], required: set[str]) -> list[_Slot] | None:
    """The plan with required parameters that got a hyperparameter value as tensors."""
    if not any(s.kind in ("value", "scalar") and s.name in required for s in slots):
        return None
    return [_Slot(s.name, "tensor", hint=s.hint, frozen=s.frozen) if s.kind in (
        "value", "scalar") and s.name in required else s for s in slots]


def _as_index(slots: list[_Slot]) -> list[_Slot] | None:
    """The plan with target-like tensors (``_INDEX_NAMES``) as index tensors; None if none."""
    if not any(s.kind in ("tensor", "none") and s.name in _INDEX_NAMES for s in slots):
        return None
    return [_Slot(s.name, "index", hint=s.hint) if s.kind in ("tensor", "none")
            and s.name in _INDEX_NAMES else s for s in slots]


def _first_working(call, slots: list[_Slot], seed: int,
                   dtype: str = "float64") -> Synthesized | str:
    """Inputs from the first layout on which forward runs, or the last error."""
    functions = [s for s in slots if s.kind == "function"]
    if functions:
        return _first_with_functions(call, slots, functions, seed, dtype)
    last_error = "no layout tried"
    fallback: Synthesized | None = None
    for layout in _layouts(slots):
        found = _on_layout(call, slots, layout, seed, dtype)
        if isinstance(found, Synthesized):
            if not _kernel_backward_misfits(call, found.args):
                return found
            fallback = fallback or found
            continue
        last_error = found
    return fallback or last_error


def _kernel_backward_misfits(call, args: tuple) -> bool:
    """True when forward launched Triton kernels and backward then fails on these inputs.

    Host code around kernels often checks no shapes: a kernel reads the first ``n`` values of
    a weight of any shape, so forward "runs" on a matmul layout given to a LayerNorm, and its
    backward then returns a correctly sized gradient autograd rejects. A later layout on which
    backward runs is preferred; none: the first layout on which forward ran (the check then
    reports what backward does there). Plain PyTorch validates shapes itself: Functions
    without kernels keep the first layout, as before.
    """
    import torch

    from gradsmith._triton import launches

    before = launches()
    fresh = [a.detach().clone().requires_grad_(a.requires_grad)
             if isinstance(a, torch.Tensor) else a for a in args]
    try:
        with torch.enable_grad():
            out = call(*fresh)
            if launches() == before:
                return False
            outs = [o for o in (out if isinstance(out, (tuple, list)) else (out,))
                    if isinstance(o, torch.Tensor) and o.requires_grad]
            leaves = [a for a in fresh if isinstance(a, torch.Tensor) and a.requires_grad]
            if outs and leaves:
                torch.autograd.grad(outs, leaves, [torch.ones_like(o) for o in outs],
                                    allow_unused=True)
    except Exception:  # noqa: BLE001 - user code: a misfit, or a bug every layout shows
        return launches() != before
    return False


def _first_with_functions(call, slots: list[_Slot], functions: list[_Slot], seed: int,
                          dtype: str) -> Synthesized | str:
    """Function arguments that only backward calls: every layout (first the ODE convention,
    a scalar time before the tensors, ``func(t, y)``) with each function returning a tensor
    or a single number, until forward *and* backward run."""
    last_error = "no layout tried"
    layouts = list(_layouts(slots))
    layouts.insert(1, _TIME_STATE)
    for layout in dict.fromkeys(layouts):
        for flags in flavours(len(functions)):
            for slot, reduce in zip(functions, flags):
                slot.value = reduce
            found = _on_layout(call, slots, layout, seed, dtype, backward=True)
            if isinstance(found, Synthesized):
                return found
            last_error = found
    for slot in functions:  # the suggested decorator shows the plain (tensor-valued) one
        slot.value = False
    return last_error


def _on_layout(call, slots: list[_Slot], layout, seed: int, dtype: str,
               backward: bool = False) -> Synthesized | str:
    """Inputs on ``layout`` if the probe (forward, and backward when asked) runs on them, else
    why it failed."""
    # Standard normal values first; positive ones (0.5 to 1.5) when the output is not
    # finite, for forwards defined on a positive domain only (log, sqrt, pow, ...).
    positive = False
    outcome = _probe(call, _build(slots, layout, seed, positive, dtype=dtype)[0], backward)
    if not isinstance(outcome, str) and not outcome:
        positive = True
        outcome = _probe(call, _build(slots, layout, seed, positive, dtype=dtype)[0], backward)
    if isinstance(outcome, str):
        return outcome
    # Fresh copies: the probe may have modified its inputs, the check must see it.
    args, parts = _build(slots, layout, seed, positive, dtype=dtype)
    variants = tuple(_variants(call, slots, layout, seed, positive, args, dtype))
    return Synthesized(tuple(args), ", ".join(parts), variants, seed)


def parameter_names(fn: Any) -> list[str]:
    """Names of the positional parameters of ``fn``'s forward (``ctx`` excluded).

    Example:
        >>> parameter_names(lambda x, dim=-1: x)
        ['x', 'dim']
    """
    _, params, _ = _signature(fn)
    return [p.name for p in params or [] if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def _probe(call: Callable[..., Any], args: list, backward: bool = False) -> bool | str:
    """True: forward ran with finite outputs; False: ran, not finite; str: why it failed.
    ``backward``: backward must run too (function arguments only backward calls)."""
    import warnings

    if backward:
        return probe_backward(call, args)

    import torch

    try:
        with torch.enable_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the check reports the user's warnings, not probes
            out = call(*args)
    except Exception as exc:  # the probe failing is expected; try the next layout
        return f"{type(exc).__name__}: {_first_line(exc)}"
    if not _has_float_tensor(out):
        return f"forward returned {type(out).__name__}, not a floating-point tensor"
    return _all_finite(out)


def _first_line(exc: BaseException) -> str:
    text = str(exc)
    return text.splitlines()[0] if text else ""


def _all_finite(out: Any) -> bool:
    import torch

    items = out if isinstance(out, (tuple, list)) else (out,)
    return all(bool(torch.isfinite(t).all()) for t in items
               if isinstance(t, torch.Tensor) and t.is_floating_point())


def _signature(fn: Any) -> tuple[Callable[..., Any], list[inspect.Parameter] | None, Any]:
    from gradsmith.discovery.collect import is_function_class

    if is_function_class(fn):
        target, call = fn.forward, fn.apply
    else:
        target, call = fn, fn
    try:
        params = list(inspect.signature(target).parameters.values())
    except (TypeError, ValueError):
        return call, None, target
    if is_function_class(fn) and not _is_modern(fn) and params:
        params = params[1:]  # ctx
    return call, params, target


def _is_modern(cls: type) -> bool:
    from torch.autograd import Function

    return cls.setup_context is not Function.setup_context


def _table_value(name: str) -> Any:
    name = name.rstrip("_") or name  # alpha_ is alpha
    for table in (_INT_VALUES, _BOOL_VALUES, _FLOAT_VALUES, _STR_VALUES):
        if name in table:
            return table[name]
    if name.startswith(("num_", "n_")) or name.endswith(("_size", "_len", "_steps")):
        return 2
    # Bounds come in pairs (min_value/max_value, grad_min/grad_max, low/high): one value for
    # both is an empty window, where a clamp or a windowed estimator is never exercised.
    words = set(name.lower().split("_"))
    if words & {"min", "low", "lower", "lo"}:
        return -1.0
    if words & {"max", "high", "upper", "hi"}:
        return 1.0
    if name.startswith(("use_", "is_", "has_", "keep_", "preserve_", "return_", "with_")):
        return False
    return None


def _plan(params: list[inspect.Parameter], hints: dict[str, Hint],
          none_first: bool = False, functions: set[str] = frozenset()) -> list[_Slot]:
    """Decide, per positional parameter, what kind of value it gets (``none_first``: a tensor
    the body checks for None starts as None, a tensor in a variant; ``functions``: parameters
    only backward calls, which get a :class:`SyntheticFn`)."""
    slots: list[_Slot] = []
    for p in params:
        if p.kind in (p.VAR_KEYWORD, p.KEYWORD_ONLY):
            continue
        hint = hints.get(p.name, Hint())
        if p.kind is p.VAR_POSITIONAL:
            modules = any(s.kind == "module" for s in slots)
            slots.append(_Slot(p.name, "params" if modules else "tensor", hint=hint))
            continue
        kind = hint.kind
        if p.name in functions and p.default is p.empty and kind in (None, "module"):
            slots.append(_Slot(p.name, "function", False, hint))
            continue
        if p.default is not p.empty:
            if p.default is None and (kind in ("tensor", "index") or (
                    kind is None and p.name in _TENSOR_NAMES)):
                slots.append(_Slot(p.name, "none", hint=hint, optional_tensor=True))
            else:
                slots.append(_Slot(p.name, "value", p.default, hint))
            continue
        if none_first and hint.optional and kind in (None, "tensor"):
            slots.append(_Slot(p.name, "none", hint=hint, optional_tensor=True))
        elif kind == "module" or (kind is None and (p.name in _CALLABLE_NAMES or p.name.endswith(
                ("_fn", "_func", "_function", "_module")))):
            slots.append(_Slot(p.name, "module", hint=hint))
        elif kind == "index":
            slots.append(_Slot(p.name, "index", hint=hint))
        elif kind == "str":
            value = hint.literals[0] if hint.literals else _STR_VALUES.get(p.name)
            slots.append(_Slot(p.name, "value", value, hint))
        elif kind == "int" and hint.literals:  # an integer code: its first listed value
            slots.append(_Slot(p.name, "value", hint.literals[0], hint))
        elif kind in ("int", "float", "bool"):
            value = _table_value(p.name)
            if value is None or type(value).__name__ != kind:
                value = {"int": 2, "float": 0.5, "bool": False}[kind]
            slots.append(_Slot(p.name, "value", value, hint))
        elif kind == "tensor" and p.name.rstrip("_") in _FLOAT_VALUES | {"dim": -1, "axis": -1}:
            # alpha.item(), min_val.type_as(x): a scalar tensor holding the usual value
            slots.append(_Slot(p.name, "scalar", _table_value(p.name), hint))
        elif kind is None and _table_value(p.name) is not None:
            slots.append(_Slot(p.name, "value", _table_value(p.name), hint))
        else:
            slots.append(_Slot(p.name, "tensor", hint=hint,
                               omittable=hint.optional and kind != "index"))
    return slots


def _n_tensors(slots: list[_Slot]) -> int:
    return sum(s.kind == "tensor" for s in slots)


def _layouts(slots: list[_Slot]):
    """Layouts in the order tried: each adjusted to the hints first, then as it is."""
    seen = set()
    for layout in _feature_layouts(slots):
        seen.add(layout)
        yield layout
    for layout in _LAYOUTS:
        for candidate in (_adjusted(slots, layout), layout):
            if candidate not in seen:
                seen.add(candidate)
                yield candidate


def _feature_layouts(slots: list[_Slot]):
    """Per-feature vectors 1-D of the first other tensor's last dimension (rows of features,
    then (batch, length, features)), then of its channels ((batch, channels, length), a
    ``bias.view(1, -1, 1)``); nothing when no slot is a per-feature vector."""
    tensors = [s for s in slots if s.kind in ("tensor", "none")]
    if not any(s.per_feature for s in tensors) or all(s.per_feature for s in tensors):
        return
    for base, axis in ((((3, 4),), -1), (((2, 3, 4),), -1), (((2, 3, 4),), 1)):
        shapes = list(_adjusted(slots, base))
        features = next(shape for s, shape in zip(tensors, shapes) if not s.per_feature)
        if len(features) > max(axis, 0):
            yield tuple((features[axis],) if s.per_feature else shape
                        for s, shape in zip(tensors, shapes))


def _adjusted(slots: list[_Slot], layout) -> tuple[tuple[int, ...], ...]:
    shapes = []
    tensors = [s for s in slots if s.kind in ("tensor", "none")]
    for i, slot in enumerate(tensors):
        shape = list(layout[min(i, len(layout) - 1)])
        hint = slot.hint or Hint()
        while len(shape) < hint.rank_min:
            shape.insert(0, 2)
        if hint.last_dim is not None and shape:
            shape[-1] = hint.last_dim
        shapes.append(tuple(shape))
    return tuple(shapes) or layout


def _build(slots: list[_Slot], layout, seed: int, positive: bool = False,
           overrides: dict[str, Any] | None = None,
           dtype: str = "float64") -> tuple[list, list[str]]:
    """The argument list for one layout; ``overrides`` maps a name to a value or a shape."""
    import torch

    float_dtype = getattr(torch, dtype)
    generator = torch.Generator().manual_seed(seed)
    overrides = overrides or {}
    args: list = []
    parts: list[str] = []
    n_tensors = n_functions = 0
    first_shape: tuple[int, ...] = tuple(layout[0]) if layout else (3, 4)
    modules: list = []

    def tensor(shape, slot: _Slot) -> Any:
        if slot.hint is not None and slot.hint.probability:
            value = torch.rand(shape, dtype=torch.float64, generator=generator)
        elif positive:
            value = torch.rand(shape, dtype=torch.float64, generator=generator) + 0.5
        else:
            value = torch.randn(shape, dtype=torch.float64, generator=generator)
        return value.to(float_dtype).requires_grad_(not slot.frozen)

    for slot in slots:
        over = overrides.get(slot.name, _MISSING)
        if slot.kind in ("tensor", "none"):
            shape = layout[min(n_tensors, len(layout) - 1)]
            n_tensors += 1
            if slot.kind == "none" and over is _MISSING or over is None:
                args.append(None)
                parts.append(f"{slot.name}=None")
                continue
            shape = over if isinstance(over, tuple) else shape
            args.append(tensor(shape, slot))
            parts.append(f"{slot.name}: {dtype} {tuple(shape)}" + _why(slot, positive, shape))
        elif slot.kind == "index":
            shape = first_shape[:-1] if len(first_shape) > 1 else (3,)
            high = max(1, min(first_shape) if first_shape else 3)
            args.append(torch.randint(0, high, shape, generator=generator))
            parts.append(f"{slot.name}: int64 {tuple(shape)} in [0, {high})")
        elif slot.kind == "scalar":
            value = slot.value if over is _MISSING else over
            dtype = torch.float64 if isinstance(value, float) else torch.int64
            t = torch.tensor(value, dtype=dtype)
            args.append(t.requires_grad_() if dtype == torch.float64 else t)
            parts.append(f"{slot.name}: tensor({value!r})")
        elif slot.kind == "module":
            module = synthetic_module(len(modules))
            modules.append(module)
            args.append(module)
            parts.append(f"{slot.name}: {module!r}")
        elif slot.kind == "function":
            fn = SyntheticFn(0.75 + 0.5 * n_functions, bool(slot.value))
            n_functions += 1
            args.append(fn)
            parts.append(f"{slot.name}: {fn!r}")
        elif slot.kind == "params":
            params = [p for m in modules for p in m.parameters()]
            args.extend(params)
            parts.append(f"*{slot.name}: the {len(params)} parameters of the modules")
        else:
            value = slot.value if over is _MISSING else over
            args.append(value)
            parts.append(f"{slot.name}={value!r}")
    return place(args, parts)


_MISSING = object()


def _why(slot: _Slot, positive: bool, shape: tuple[int, ...] = ()) -> str:
    """What the Inputs column says about a tensor's values and why they were chosen."""
    text = ""
    if slot.hint is not None and slot.hint.probability:
        text = " in [0, 1) (probabilities: forward samples bernoulli of it)"
    elif positive:
        text = " in [0.5, 1.5)"
    if slot.frozen:
        text += " (no grad: backward returns None for it)"
    if slot.per_feature and len(shape) == 1:
        text += " (per-feature: the code reduces or broadcasts it over the other dims)"
    return text


def synthetic_module(index: int = 0) -> Any:
    """A shape-agnostic module with one parameter: ``tanh(y) * weight`` (for ``Fm(x)``)."""
    import torch

    class Scaled(torch.nn.Module):
        def __init__(self, weight: float) -> None:
            super().__init__()
            self.weight = torch.nn.Parameter(torch.tensor(weight, dtype=torch.float64))

        def forward(self, y, *args, **kwargs):
            return torch.tanh(y) * self.weight

        def __repr__(self) -> str:
            return f"Module(tanh(y) * {self.weight.item():g})"

    return Scaled(0.75 + 0.5 * index)


def _variants(call, slots: list[_Slot], layout, seed: int, positive: bool, primary: list,
              dtype: str = "float64"):
    """Other input sets the forward accepts: hyperparameters, optional tensors, shapes."""
    candidates: list[tuple[str, dict[str, Any], Any]] = []
    floats = {s.name: s.value for s in slots if s.kind == "value"
              and isinstance(s.value, float) and not isinstance(s.value, bool)}
    if floats:
        changed = {k: (v * 1.5 if v else 0.5) for k, v in floats.items()}
        candidates.append((", ".join(f"{k}={v!r}" for k, v in changed.items()), changed, layout))
    for slot in slots:  # a mode selector: each other value the code compares it with
        if slot.kind == "value" and slot.hint is not None and slot.value in slot.hint.literals:
            for other in list(dict.fromkeys(slot.hint.literals))[:4]:
                if other != slot.value and type(other) is type(slot.value):
                    candidates.append((f"{slot.name}={other!r}", {slot.name: other}, layout))
    optional = [s for s in slots if s.optional_tensor]
    for slot in optional:
        for shape in _optional_shapes(call, primary, layout):
            candidates.append((f"{slot.name} given: float64 {shape}", {slot.name: shape}, layout))
    for slot in (s for s in slots if s.omittable):
        candidates.append((f"{slot.name}=None", {slot.name: None}, layout))
    tensors = [i for i, s in enumerate(s for s in slots if s.kind in ("tensor", "none"))]
    if tensors:
        resized = tuple(tuple(_RESIZE.get(d, d + 1) for d in shape) for shape in layout)
        names = [s.name for s in slots if s.kind == "tensor"]
        if resized != layout:
            candidates.append((f"other shapes: {_shapes_text(names, resized)}", {}, resized))
        broadcast = _broadcast(layout, len(names))
        if broadcast is not None:
            candidates.append((f"size-1 dimension: {_shapes_text(names, broadcast)}", {},
                               broadcast))
    seen_optional: set[str] = set()
    for change, overrides, lay in candidates:
        opt = next((k for k, v in overrides.items() if isinstance(v, tuple)), None)
        if opt is not None and opt in seen_optional:
            continue
        args, _ = _build(slots, lay, seed, positive, overrides, dtype)
        if isinstance(_probe(call, args, any(s.kind == "function" for s in slots)), str):
            continue
        if _kernel_backward_misfits(call, tuple(args)):  # a shape its kernels cannot take
            continue
        if opt is not None:
            seen_optional.add(opt)
        args, parts = _build(slots, lay, seed, positive, overrides, dtype)
        yield Variant(tuple(args), ", ".join(parts), change)


def _optional_shapes(call, primary: list, layout) -> list[tuple[int, ...]]:
    """Shapes to try for an optional tensor: the output's last dim, the first input's shape."""
    import torch

    shapes: list[tuple[int, ...]] = []
    import warnings

    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = call(*primary)
        first = out[0] if isinstance(out, (tuple, list)) else out
        if isinstance(first, torch.Tensor) and first.dim() >= 1:
            shapes.append((first.shape[-1],))
    except Exception:  # noqa: BLE001 - the primary ran once; a second failure adds nothing
        pass
    if layout and tuple(layout[0]) not in shapes:
        shapes.append(tuple(layout[0]))
    shapes.append(())
    return shapes


def _broadcast(layout, n: int) -> tuple[tuple[int, ...], ...] | None:
    """A layout with a size-1 leading dimension: on every later tensor shaped like the first
    (broadcast against it; attention's k and v stay alike), else on the only tensor."""
    shapes = [tuple(layout[min(i, len(layout) - 1)]) for i in range(max(n, 1))]
    later = [i for i in range(1, len(shapes))
             if shapes[i] == shapes[0] and len(shapes[i]) >= 1 and shapes[i][0] != 1]
    for i in later:
        shapes[i] = (1, *shapes[i][1:])
    if later:
        return tuple(shapes)
    if n == 1 and len(shapes[0]) >= 2 and shapes[0][0] != 1:
        return ((1, *shapes[0][1:]),)
    return None


def _shapes_text(names: list[str], layout) -> str:
    return ", ".join(f"{n} {tuple(layout[min(i, len(layout) - 1)])}"
                     for i, n in enumerate(names))


def _has_float_tensor(out: Any) -> bool:
    import torch

    items = out if isinstance(out, (tuple, list)) else (out,)
    return any(isinstance(t, torch.Tensor) and t.is_floating_point() for t in items)


def _fix(fn: Any, why: str, slots: list[_Slot], hints: dict[str, Hint]) -> str:
    name = getattr(fn, "__name__", type(fn).__name__)
    where = f"class {name}" if isinstance(fn, type) else f"def {name}"
    return (f"no registered example and no inputs could be synthesised: {why}. Fix: register "
            f"inputs for every argument of forward, e.g. `{example_line(slots)}` above "
            f"`{where}`")


def example_line(slots: list[_Slot]) -> str:
    """A ``@gradsmith.example`` line with one entry per forward argument, in order."""
    if not slots:
        return ("@gradsmith.example(lambda: (torch.randn(4, 3, dtype=torch.float64, "
                "requires_grad=True),))")
    entries, names = [], []
    n_tensors = 0
    for slot in slots:
        names.append(("*" if slot.kind == "params" else "") + slot.name)
        if slot.kind in ("tensor", "none"):
            shape = list(_LAYOUTS[0][0])
            hint = slot.hint or Hint()
            while len(shape) < hint.rank_min:
                shape.insert(0, 2)
            if hint.last_dim is not None:
                shape[-1] = hint.last_dim
            n_tensors += 1
            entries.append("None" if slot.kind == "none" else
                           f"torch.randn({', '.join(map(str, shape))}, dtype=torch.float64, "
                           "requires_grad=True)")
        elif slot.kind == "index":
            entries.append("torch.randint(0, 3, (3,))")
        elif slot.kind == "scalar":
            entries.append(f"torch.tensor({slot.value!r})")
        elif slot.kind == "module":
            entries.append("torch.nn.Linear(4, 4, dtype=torch.float64)")
        elif slot.kind == "function":
            entries.append(SyntheticFn(0.75, bool(slot.value)).source)
        elif slot.kind == "params":
            entries.append("*module_parameters")
        else:
            entries.append(repr(slot.value) if slot.value is not None else "...")
    body = ", ".join(entries) + ("," if len(entries) == 1 else "")
    return f"@gradsmith.example(lambda: ({body}))  # ({', '.join(names)})"
