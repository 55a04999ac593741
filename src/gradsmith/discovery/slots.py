"""How each forward parameter gets its value in synthesis: the plan (private).

:func:`plan_slots` decides, per positional parameter, a kind (a hyperparameter's Python value, a
float tensor, an index tensor, a module, a function, ...) from the hints read in its body
(:mod:`~gradsmith.discovery.hints`) and, for hyperparameters, their conventional names;
:func:`with_contract` applies the contract the code is written for
(:mod:`~gradsmith.discovery.contract`); :func:`as_tensors` and :func:`as_index` are the
fallback plans.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gradsmith.discovery.callables import distance_kind
from gradsmith.discovery.hints import Hint
from gradsmith.discovery.uses import Use

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


# Tensor parameters that, when every layout fails with floats, are tried as class indices
# (a loss's target read by a kernel, where no gather in forward's body says so).
_INDEX_NAMES = {"target", "targets", "label", "labels", "ids", "indices", "index", "token_ids",
                "shift_labels", "y"}


@dataclass
class Slot:
    """How one positional parameter gets its value."""

    name: str
    kind: str                 # value | tensor | index | module | function | params | none
    #                           | config | sections | size | distance | split | row_size
    #                           | keyed
    value: Any = None
    hint: Hint | None = None
    optional_tensor: bool = False   # None by default, a tensor in a variant
    omittable: bool = False         # a tensor that may also be None (checked with `is None`)
    frozen: bool = False            # backward returns None for it: no requires_grad
    per_feature: bool = False       # 1-D of the first tensor's last dimension, tried first
    sentinel: Any = None            # compared for equality with this parameter or number


def signature(fn: Any) -> tuple[Callable[..., Any], list[inspect.Parameter] | None, Any]:
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
    if set(name.lower().split("_")) & {"eps", "epsilon", "tol", "tolerance"}:
        return _FLOAT_VALUES["eps"]  # gradient_eps, rtol: a tiny guard, never 0.5
    # Bounds come in pairs (min_value/max_value, grad_min/grad_max, low/high): one value for
    # both is an empty window, where a clamp or a windowed estimator is never exercised.
    words = set(name.lower().split("_"))
    if words & {"min", "low", "lower", "lo", "floor"}:
        return -1.0
    if words & {"max", "high", "upper", "hi", "ceil"}:
        return 1.0
    if name.startswith(("use_", "is_", "has_", "keep_", "preserve_", "return_", "with_")):
        return False
    return None


def plan_slots(params: list[inspect.Parameter], hints: dict[str, Hint],
               none_first: bool = False, functions: set[str] = frozenset(),
               uses: dict[str, Use] | None = None) -> list[Slot]:
    """Decide, per positional parameter, what kind of value it gets (``none_first``: a tensor
    the body checks for None starts as None, a tensor in a variant; ``functions``: parameters
    only backward calls, which get a :class:`SyntheticFn`; ``uses``: how the code uses each
    argument, see :mod:`~gradsmith.discovery.uses`)."""
    slots: list[Slot] = []
    varargs = any(p.kind is p.VAR_POSITIONAL for p in params)
    for p in params:
        if p.kind in (p.VAR_KEYWORD, p.KEYWORD_ONLY):
            continue
        hint = hints.get(p.name, Hint())
        if p.kind is p.VAR_POSITIONAL:
            if (split := _split_at(p.name, hint, slots)) is not None:
                slots.append(split)
                continue
            modules = any(s.kind == "module" for s in slots)
            slots.append(Slot(p.name, "params" if modules else "tensor", hint=hint))
            continue
        use = (uses or {}).get(p.name)
        if use is not None and use.boolean and hint.kind in (None, "bool"):
            # only tested for truth: a bool, the other value tried as a variant
            hint.kind, hint.literals = "bool", [False, True]
        kind = hint.kind
        if none_first and hint.optional and p.default is p.empty and (
                kind == "module" or (kind is None and p.name in functions)):
            # a hook the code tests for None (`if eval_func is not None`): None first, as
            # callers pass it; an invented one may change what forward returns
            slots.append(Slot(p.name, "none", hint=hint))
            continue
        if p.name in functions and p.default is p.empty and kind in (None, "module"):
            slots.append(Slot(p.name, "function", False, hint))
            continue
        used = _from_use(p.name, kind, (uses or {}).get(p.name), varargs, hint)
        if used is not None and p.default is p.empty:
            slots.append(used)
            continue
        if p.default is not p.empty:
            if p.default is None and (kind in ("tensor", "index") or (
                    kind is None and _tensor_named(p.name))):
                slots.append(Slot(p.name, "none", hint=hint, optional_tensor=True))
            else:
                slots.append(Slot(p.name, "value", p.default, hint))
            continue
        if kind in ("group", "reduce_op"):  # dist.all_reduce(x, op=op, group=group)
            slots.append(Slot(p.name, "value", _collective_value(kind), hint))
        elif hint.window and kind != "tensor":  # F.avg_pool2d(x, kernel): a pooling window
            slots.append(Slot(p.name, "value", (2,) * hint.window, hint))
        elif none_first and hint.optional and kind in (None, "tensor"):
            slots.append(Slot(p.name, "none", hint=hint, optional_tensor=True))
        elif kind == "module" or (kind is None and (p.name in _CALLABLE_NAMES or p.name.endswith(
                ("_fn", "_func", "_function", "_module")))):
            slots.append(Slot(p.name, "module", hint=hint))
        elif kind == "index":
            slots.append(Slot(p.name, "index", hint=hint))
        elif kind == "str":
            value = hint.literals[0] if hint.literals else _STR_VALUES.get(p.name)
            slots.append(Slot(p.name, "value", value, hint))
        elif kind == "int" and hint.row_size and not hint.literals:
            slots.append(Slot(p.name, "row_size", hint=hint))  # the first tensor's last size
        elif kind in ("int", "float") and hint.literals:  # a mode selector: its first value
            slots.append(Slot(p.name, "value", hint.literals[0], hint))
        elif kind in ("int", "float", "bool"):
            value = _table_value(p.name)
            if kind == "int" and value in (-1.0, 1.0) and type(value) is float:
                value = 1 if value < 0 else 2  # int bounds (floor_a, ceil_a): an open window
            if kind == "float" and type(value) is int:  # k: float, the usual k = 1 as 1.0
                value = float(value)
            if value is None or type(value).__name__ != kind:
                value = {"int": 2, "float": 0.5, "bool": False}[kind]
            if kind == "int" and hint.count and value < 1:  # range(dim): dim = -1 is no dims
                value = 1
            slots.append(Slot(p.name, "value", _above(value, hint), hint))
        elif kind == "tensor" and p.name.rstrip("_") in _FLOAT_VALUES | {"dim": -1, "axis": -1}:
            # alpha.item(), min_val.type_as(x): a scalar tensor holding the usual value
            slots.append(Slot(p.name, "scalar", _table_value(p.name), hint))
        elif kind == "tensor" and hint.item:  # (2 ** k - 1).item() in backward: one value
            slots.append(Slot(p.name, "scalar", 2.0, hint))
        elif kind is None and _table_value(p.name) is not None:
            slots.append(Slot(p.name, "value", _above(_table_value(p.name), hint), hint))
        else:
            slots.append(Slot(p.name, "tensor", hint=hint,
                               omittable=hint.optional and kind != "index"))
    return slots


def _collective_value(kind: str) -> Any:
    """The default process group (None) for a ``group``, a sum for a reduction ``op``: the
    reduction whose adjoint is itself (see :func:`gradsmith.discovery.collectives.read_group_args`)."""
    if kind == "group":
        return None
    import torch.distributed as dist

    return dist.ReduceOp.SUM


def _above(value: Any, hint: Hint) -> Any:
    """A float that backward divides by ``(value - c)`` (``2 / (alpha - 1)``) above ``c``:
    ``c + 1`` (alpha = 2, not 0.5), other values as they are."""
    if type(value) is float and hint.above is not None and value <= hint.above:
        return hint.above + 1.0
    return value


def _tensor_named(name: str) -> bool:
    """Named like a tensor: ``bias``, ``x``, or a mask, bias or weight of something
    (``weight_mask``, ``attn_bias``; a None default then means a tensor that may be absent)."""
    return name in _TENSOR_NAMES or name.rsplit("_", 1)[-1] in {"mask", "bias", "weight"}


def _split_at(name: str, hint: Hint, slots: list[Slot]) -> Slot | None:
    """``*args`` that forward splits at an int parameter (``args[:length]`` the inputs,
    ``args[length:]`` the rest, a checkpoint's parameters): as many tensors as that int, which
    becomes at least 2, so the first part holds two differentiable inputs and each can be
    switched off in turn (a backward that crashes on a frozen input is caught). When forward
    reads the rest (``args[length:]``), it gets the parameters of the module arguments, as a
    checkpoint's caller passes them (``apply(func, len(xs), *xs, *func.parameters())``);
    without a module it stays empty."""
    at = next((s for s in slots if s.name == hint.split_by and s.kind == "value"
               and type(s.value) is int), None)
    if at is None:
        return None
    at.value = max(at.value, 2)
    return Slot(name, "split", hint=hint)  # no value: a printed template shows `...` here


def _from_use(name: str, kind: str | None, use: Use | None, varargs: bool,
              hint: Hint) -> Slot | None:
    """A config object, a mapping, sections, a size or a plain function, when the code's use
    says so."""
    if use is None:
        return None
    if use.keyed and kind in (None, "module", "seq"):  # cfg["tau"]: a tensor is never keyed
        return Slot(name, "keyed", dict(use.keys), hint)
    if use.config and kind in (None, "module"):
        values = {attr: _attribute_value(attr, how) for attr, how in use.attrs.items()
                  if attr not in use.assigned}
        return Slot(name, "config", values, hint)
    if use.sections and kind in (None, "int", "seq"):
        return Slot(name, "sections", use.split_dim, hint)
    if use.size and kind in (None, "seq"):  # an int: torch.zeros(n) is a length
        return Slot(name, "size", None, hint)
    if kind == "module" and not use.module and not varargs:  # act(x): no parameters to train
        distance = distance_kind(name)
        if distance is not None:  # named as a distance: backward may rely on it being one
            return Slot(name, "distance", distance == "squared", hint)
        return Slot(name, "function", False, hint)
    return None


def _attribute_value(attr: str, how: str) -> Any:
    """A config attribute's value: the plain function for a called one, else the name's
    usual value when its type fits the use (``num_bits`` 8), else 2 (an int) or 0.5."""
    if how == "call":
        return identity
    value = _table_value(attr)
    wanted = int if how == "int" else float
    return value if type(value) is wanted else wanted(2 if how == "int" else 0.5)


def identity(*args: Any, **kwargs: Any) -> Any:
    """The plain function a config object's called attribute gets (``qparams.quantize(x)``):
    its first argument, or, called by keyword only (``noiser._sample_noise(epsilon=e,
    bounds=b, image=a)``), the last array or tensor passed."""
    if args:
        return args[0]
    arrays = [v for v in kwargs.values() if hasattr(v, "shape")]
    return arrays[-1] if arrays else None


def parameter_names(fn: Any) -> list[str]:
    """Names of the positional parameters of ``fn``'s forward (``ctx`` excluded).

    Example:
        >>> parameter_names(lambda x, dim=-1: x)
        ['x', 'dim']
    """
    _, params, _ = signature(fn)
    return [p.name for p in params or [] if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
