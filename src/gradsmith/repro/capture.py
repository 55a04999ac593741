"""Record the exact inputs of a check as JSON-ready data, so a failing row can be replayed.

Tensors keep their exact values (Python floats round-trip float16/32/64 exactly), dtype, shape
and ``requires_grad`` (a sparse tensor its dense values and its ``layout``); plain values keep their ``repr``; gradsmith's synthetic modules and
functions keep their weight (and a function whether it sums to a single number); a user's
module or top-level function is pickled (a function by reference). Anything else (a lambda, an
arbitrary object) is recorded as opaque: its script says so instead of guessing.
"""

from __future__ import annotations

import math
import types
from typing import Any

# Above this many elements a tensor's values are left out of the row (the JSON stays small);
# ``--repro`` still gets them, as a .pt file beside the script.
MAX_INLINE = 20_000


def capture_args(args: tuple, inline_limit: int = MAX_INLINE) -> list[dict]:
    """Describe each positional argument (see :func:`capture_value`)."""
    return [capture_value(a, inline_limit) for a in args]


def capture_value(value: Any, inline_limit: int = MAX_INLINE) -> dict:
    """A JSON-ready description of one argument.

    Example:
        >>> import torch
        >>> capture_value(torch.tensor([1.5, float("nan")]))["values"]
        [1.5, 'nan']
        >>> capture_value(1.5)
        {'type': 'value', 'repr': '1.5'}
    """
    import torch

    if isinstance(value, torch.Tensor):
        t = value.detach()
        sparse = t.layout != torch.strided
        spec = {"type": "tensor", "dtype": str(t.dtype).replace("torch.", ""),
                "shape": list(t.shape), "requires_grad": bool(value.requires_grad),
                "contiguous": sparse or bool(t.is_contiguous()), "values": None}
        if sparse:  # its values as a dense tensor's (a sparse one has no reshape)
            spec["layout"] = str(t.layout).replace("torch.", "")
            t = t.to_dense()
        if t.numel() <= inline_limit and t.device.type != "meta":
            spec["values"] = [_number(v) for v in t.reshape(-1).cpu().tolist()]
        return spec
    if isinstance(value, torch.nn.Module):
        weight = getattr(value, "weight", None)
        if type(value).__name__ == "Scaled" and "gradsmith" in type(value).__module__:
            return {"type": "module", "weight": float(weight.detach())}
        return _pickled(value)
    if type(value).__name__ == "SyntheticFn" and "gradsmith" in type(value).__module__:
        return {"type": "function", "weight": value.weight, "reduce": value.reduce}
    if isinstance(value, types.SimpleNamespace):  # a config object synthesis invented
        return {"type": "namespace", "items": {k: capture_value(v, inline_limit)
                                               for k, v in vars(value).items()}}
    if getattr(value, "__qualname__", None) == "identity" and \
            getattr(value, "__module__", None) == "gradsmith.discovery.slots":
        return {"type": "identity"}  # a config object's called attribute: rebuilt in the script
    if isinstance(value, types.FunctionType):  # a top-level function: pickled by reference
        return _pickled(value, value.__module__)
    if isinstance(value, (list, tuple)):  # torch.Size too: the script passes a tuple
        return {"type": "list" if isinstance(value, list) else "tuple",
                "items": [capture_value(v, inline_limit) for v in value]}
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {"type": "dict", "items": {k: capture_value(v, inline_limit)
                                          for k, v in value.items()}}
    # the base type's repr, a literal even for a subclass (an IntEnum, a str with its own
    # __repr__): the script pastes it as code
    if value is None or isinstance(value, bool):
        return {"type": "value", "repr": repr(None if value is None else bool(value))}
    if isinstance(value, (int, str)):
        base = int if isinstance(value, int) else str
        return {"type": "value", "repr": base.__repr__(value)}
    if isinstance(value, float):
        return {"type": "value", "repr": float.__repr__(value) if math.isfinite(value) else
                f"float({float.__repr__(value)!r})"}
    if isinstance(value, torch.dtype):
        return {"type": "value", "repr": str(value)}
    return {"type": "opaque", "repr": _short(repr(value))}


def _pickled(module: Any, home: str | None = None) -> dict:
    """A user's module as ``torch.save`` bytes (base64): the script loads it back with its
    class imported from the module that defines it (the user's file, or torch.nn). A function
    (``home``: the module defining it) is saved by reference the same way; a lambda or a
    closure cannot be, and stays opaque."""
    import base64
    import io

    import torch

    buffer = io.BytesIO()
    try:
        torch.save(module, buffer)
    except Exception:  # noqa: BLE001 - unpicklable (lambdas, closures): say so in the script
        return {"type": "opaque", "repr": _short(repr(module))}
    return {"type": "pickled", "module": home or type(module).__module__,
            "repr": _short(getattr(module, "__qualname__", None) or repr(module)),
            "data": base64.b64encode(buffer.getvalue()).decode("ascii")}


def capture_ties(args: tuple) -> list[list]:
    """``[module leaf, parameter name, tensor leaf]`` for every tensor argument that IS a
    parameter of a module argument (memcnn's ``apply(x, Fm, *Fm.parameters())``), leaves
    numbered as ``torch.utils._pytree.tree_flatten`` numbers them: the script gives the module
    that argument's value in every call, as gradsmith does."""
    import torch
    from torch.utils._pytree import tree_flatten

    leaves = tree_flatten(tuple(args))[0]
    by_id = {id(v): i for i, v in enumerate(leaves) if isinstance(v, torch.Tensor)}
    return [[i, name, by_id[id(p)]] for i, v in enumerate(leaves)
            if isinstance(v, torch.nn.Module) for name, p in v.named_parameters()
            if id(p) in by_id]


def tensors_of(args: tuple) -> list:
    """Every tensor of ``args`` in the order :func:`capture_args` meets them (for .pt files)."""
    import torch

    found: list = []

    def walk(v: Any) -> None:
        if isinstance(v, torch.Tensor):
            found.append(v.detach().cpu())
        elif isinstance(v, (list, tuple)):
            for item in v:
                walk(item)
        elif isinstance(v, dict):
            for item in v.values():
                walk(item)

    walk(tuple(args))
    return found


def _number(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    if isinstance(v, complex):  # JSON and the result pipe carry plain data: "(1+2j)"
        return str(v)
    return v


def _short(text: str) -> str:
    return text if len(text) <= 200 else text[:197] + "..."
