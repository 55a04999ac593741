"""Values a helper states for an argument forward only hands on to it (private).

``def forward(ctx, input, stochastic=False): return utils.round_power_of_2(input, stochastic)``
hands its second argument to ``round_power_of_2(x, rounding='deterministic')``, which asserts
``rounding in ['deterministic', 'stochastic']``: forward's own default (``False``, another kind)
fails the assert on every call, and the project's modules always pass a mode string (corpus 13
held-out: DeepShift RoundPowerOf2, a skip). The helper that receives the argument states the
kind and a value it works with: its default. Tried only where no other input made forward run,
with the value and where it was read said in the Inputs column.

Only a plain Python function reached through forward's module globals (``helper(...)`` or
``module.helper(...)``, never torch's), a forward parameter passed as a whole (``P`` itself, not
an expression of it), and a literal default (str, int, float or bool) of another type than
forward's own default for it.
"""

from __future__ import annotations

import ast
import inspect
import types
from typing import Any

from gradsmith.discovery.source import dotted, parse, through_namespaces

_LITERALS = (str, int, float, bool)


def passed_on(owner: Any) -> dict[str, tuple[Any, str]]:
    """forward parameter -> (the helper's default for it, where it was read); empty if none."""
    forward = inspect.getattr_static(owner, "forward", None) if isinstance(owner, type) else None
    forward = getattr(forward, "__func__", forward)
    tree = parse(forward) if isinstance(forward, types.FunctionType) else None
    if tree is None:
        return {}
    params = dict(list(inspect.signature(forward).parameters.items())[1:])
    found: dict[str, tuple[Any, str]] = {}
    for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
        helper = _helper(call.func, forward.__globals__)
        if helper is None:
            continue
        try:
            slots = list(inspect.signature(helper).parameters.values())
        except (TypeError, ValueError):
            continue
        pairs = [(a, slots[i]) for i, a in enumerate(call.args)
                 if i < len(slots) and not isinstance(a, ast.Starred)]
        named = {p.name: p for p in slots}
        pairs += [(k.value, named[k.arg]) for k in call.keywords if k.arg in named]
        for node, slot in pairs:
            if not isinstance(node, ast.Name) or node.id not in params or node.id in found:
                continue
            default, own = slot.default, params[node.id].default
            if type(default) in _LITERALS and (own is inspect.Parameter.empty
                                                or type(own) is not type(default)):
                found[node.id] = (default, f"forward hands {node.id} to "
                                  f"{helper.__qualname__} as `{slot.name}`, whose default "
                                  "that is")
    return found


def _helper(func: ast.expr, scope: dict) -> types.FunctionType | None:
    """The plain Python function ``func`` names through the module's globals, not torch's."""
    func, path = dotted(func)
    if not isinstance(func, ast.Name) or func.id not in scope:
        return None
    value = through_namespaces(scope[func.id], path)
    if not isinstance(value, types.FunctionType):
        return None
    module = getattr(value, "__module__", "") or ""
    return None if module.split(".")[0] in ("torch", "numpy", "gradsmith") else value
