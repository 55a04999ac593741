"""A Module whose ``forward`` calls a Function, as plain functions synthesis can probe (private).

Synthesis probes plain functions. A Module that passes ``self.weight`` and state tensors to
``Fn.apply`` becomes one: the instance is built once per set of constructor values (seeded; a
constructor that raises, or downloads data it cannot reach, rules those values out before any
synthesis), each call works on a copy of it (no state carried from one probe to the next),
moves its floating parameters and buffers to the dtype of the first floating tensor it is given (Modules are float32, synthesis
tries float64 first) and calls ``forward``. The callable shows ``forward``'s signature and
source, so synthesis reads what forward does with its arguments (``B, C, H, W = X.shape``).

A constructor argument is configuration, not data: a Python number, never a synthesised
tensor. One without a default gets the hyperparameter table's value for its name (``stride``,
``n_out``, ``*_size``) or a small size, and a few sizes are tried in turn (a PCA layer's
``n_out`` must not exceed the batch, a patch size must fit the image).
"""

from __future__ import annotations

import inspect
from typing import Any

from gradsmith.discovery.slots import _table_value

#: Sizes tried, in turn, for constructor arguments the table does not name.
_SIZES = (2, 4)


def module_calls(name: str, cls: type) -> list[tuple[Any, str]]:
    """``(callable, text)`` per constructor candidate: the callable builds ``cls`` and calls
    its forward; empty when the constructor or forward cannot be read."""
    try:
        init = list(inspect.signature(cls.__init__).parameters.values())[1:]
        forward = list(inspect.signature(cls.forward).parameters.values())[1:]
    except (TypeError, ValueError):
        return []
    required = [p for p in init if p.default is p.empty
                and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    made = []
    for size in _SIZES if required else _SIZES[:1]:
        given = {p.name: _value(p, size) for p in required}
        try:
            template = _built(cls, given)
        except Exception:  # noqa: BLE001 - the user's constructor: these values do not do
            continue
        shown = ", ".join(f"{k}={v!r}" for k, v in given.items())
        made.append((_caller(name, cls, template, forward),
                     f"{name}({shown}).forward({', '.join(p.name for p in forward)})"))
    return made


def _value(param: inspect.Parameter, size: int) -> Any:
    known = _table_value(param.name)
    if isinstance(known, (bool, int, float, str)):
        return known
    if param.annotation in (float, "float"):
        return float(size)
    return size


def _caller(name: str, cls: type, template: Any, forward: list[inspect.Parameter]):
    def run(*args, **named):
        module = _copied(template)
        return module.forward(*_matched(module, args), **named)

    run.__signature__ = inspect.Signature(forward)
    run.__name__ = run.__qualname__ = name
    run.__wrapped__ = cls.forward  # its source: synthesis reads what forward does with X
    return run


def _built(cls: type, given: dict) -> Any:
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return cls(**given)


def _copied(template: Any) -> Any:
    import copy

    try:
        return copy.deepcopy(template)
    except Exception:  # noqa: BLE001 - an attribute that cannot be copied: share the instance
        return template


def _matched(module: Any, args: tuple) -> tuple:
    import torch

    dtype = next((a.dtype for a in args if isinstance(a, torch.Tensor)
                  and a.is_floating_point()), None)
    if dtype is not None and isinstance(module, torch.nn.Module):
        module.to(dtype)
    return args
