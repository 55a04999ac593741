"""Python source for a module argument that its class builds with no arguments.

A spike whose backward asks a module for its surrogate (``ctx.surrogate_fn.surrogate_gradient
(x)``: corpus 9b held-out ``SurrogateSpike``, ``MPDAdaptiveSpike``) is checked with an object
the project's own class builds, ``MPDAdaptiveSurrogate()``. The printed line wrote that
argument as ``...`` (no source for an object), a template that cannot pass as printed,
although the surrogate fitted to it was checked. Where a fresh ``Cls()`` has the same state as
the object the check used (same type, equal tensors, parameters, buffers and attributes, the
same training mode), the line writes ``Cls()``: by its name where the Function's module binds
it, else imported from its module (``__import__('pkg.mod', fromlist=['Cls']).Cls()``). An object
with randomly initialised weights, changed by the check (running statistics updated in
backward) or built with arguments stays ``...``, and so does any object that is no
``torch.nn.Module`` (a settings object: what forward reads of it is the user's to write).
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import torch

#: How deep attributes are compared (objects holding objects).
DEPTH = 3
_SCALARS = (bool, int, float, complex, str, bytes, type(None))


def source(value: Any, home: str | None) -> str | None:
    """``Cls()`` (or its import) for a module ``value`` when a fresh ``Cls()`` equals it, else
    None.
    ``home``: the name of the module the printed line is pasted into (the Function's)."""
    if not isinstance(value, torch.nn.Module):
        return None
    cls = type(value)
    module_name = getattr(cls, "__module__", None) or ""
    if (module_name in ("builtins", "types") or module_name.split(".")[0] in ("torch", "gradsmith")
            or "." in cls.__qualname__ or "<" in module_name):
        return None
    try:
        module = importlib.import_module(module_name)
    except Exception:  # noqa: BLE001 - a module that cannot be imported by its name
        return None
    if getattr(module, cls.__name__, None) is not cls:
        return None
    try:
        fresh = cls()
    except Exception:  # noqa: BLE001 - a class that needs arguments (or fails): no source
        return None
    if not same(value, fresh):
        return None
    where = sys.modules.get(home or "")
    if where is not None and getattr(where, cls.__name__, None) is cls:
        return f"{cls.__name__}()"
    return f"__import__({module_name!r}, fromlist=[{cls.__name__!r}]).{cls.__name__}()"


def same(a: Any, b: Any, depth: int = 0) -> bool:
    """Whether ``a`` and ``b`` hold the same state (tensors by value, whatever their floating
    dtype: the check works on a float64 copy of a module)."""
    if type(a) is not type(b) or depth > DEPTH:
        return False
    if isinstance(a, torch.Tensor):
        if a.shape != b.shape or a.is_floating_point() != b.is_floating_point():
            return False
        if a.is_floating_point():
            return torch.equal(a.detach().to(torch.float64), b.detach().to(torch.float64))
        return torch.equal(a, b)
    if isinstance(a, _SCALARS):
        return a == b or (a != a and b != b)  # NaN equals NaN here
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y, depth + 1) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k], depth + 1) for k in a)
    if isinstance(a, torch.nn.Module):
        sa, sb = a.state_dict(), b.state_dict()
        if a.training != b.training or not same(dict(sa), dict(sb), depth):
            return False
        return (same(_plain(a), _plain(b), depth + 1)
                and same(dict(a._modules), dict(b._modules), depth + 1))
    if callable(a) and not hasattr(a, "__dict__"):
        return a is b
    if hasattr(a, "__dict__"):
        return same(_plain(a), _plain(b), depth + 1)
    return a is b


def _plain(obj: Any) -> dict:
    """An object's own attributes, a module's bookkeeping (``_parameters``, hooks) left out."""
    return {k: v for k, v in vars(obj).items() if not k.startswith("_")}
