"""An attribute the code used on an object gradsmith synthesised, which the object lacked.

Zero-configuration inputs give an argument the code uses as an object (``op.forward(x)``,
``func(t, y)``) a stand-in: a small module, a plain function, a namespace, a project class
built with its defaults. When forward or backward then raises ``AttributeError`` or
``TypeError`` *on that object* (``'Scaled' object has no attribute 'adjoint'``, ``'SyntheticFn'
object is not subscriptable``), the object was gradsmith's choice and real ones have what the
code uses: nothing shows the Function is wrong, so the row is a skip that names the attribute,
never an error. The same error on a tensor, a number or an object the user registered stays
what it is (checked by the type named in the error: a synthesised argument's own class, not a
builtin one; builtin values of a guessed kind are :mod:`~gradsmith.discovery.doubt`'s).

A synthesised tensor lacking an attribute ``torch.Tensor`` does not define is the same case:
fast-differential-privacy's privacy engine tags each parameter (``weight.per_sample_clip``,
``weight.noise``) before training, and backward reads the tags. A fresh tensor has none, so
``'Tensor' object has no attribute 'per_sample_clip'`` is the synthesis's, not harm. It counts
only when the raising line reads the attribute off a name that is not one of backward's
incoming gradients (those autograd makes, and no user can tag).
"""

from __future__ import annotations

import re
from typing import Any

# Errors that name the class of the value they were raised on.
_ON_TYPE = (
    re.compile(r"'(?P<type>\w+)' object has no attribute '(?P<attr>\w+)'"),
    re.compile(r"'(?P<type>\w+)' object is not (?P<attr>callable|subscriptable|iterable)"),
    re.compile(r"(?P<type>\w+)\.(?P<attr>\w+)\(\) (?:takes|got|missing)"),
)
_RAISED = {"backward-error", "forward-error"}


def lacked_by_synthesised(fn: Any, args: tuple, errors: list) -> str:
    """Why the error findings ``errors`` (a check report's) are not the Function's: every one
    says forward or backward raised ``AttributeError``/``TypeError`` on an argument of ``args``
    that synthesis built (not a tensor, not a builtin value). Empty otherwise.

    Example:
        >>> import types
        >>> from gradsmith.checker.report import Finding
        >>> class Fake:
        ...     pass
        >>> raised = Finding("backward-error", "error", "backward raised AttributeError: "
        ...                  "'Fake' object has no attribute 'adjoint' (at f.py:9)", "", "grads",
        ...                  details={"exception": "AttributeError"})
        >>> print(lacked_by_synthesised(None, (Fake(),), [raised]))  # doctest: +ELLIPSIS
        backward used .adjoint on args[0], an object gradsmith synthesised (...), which lacks it ...
    """
    import torch

    if not errors or any(f.code not in _RAISED for f in errors):
        return ""
    kinds = {type(a).__name__: i for i, a in enumerate(args)
             if not isinstance(a, torch.Tensor) and type(a).__module__ != "builtins"}
    reasons = []
    for finding in errors:
        if (finding.details or {}).get("exception") not in ("AttributeError", "TypeError"):
            return ""
        if tagged := _tensor_tag(fn, args, finding.message):
            reasons.append(tagged)
            continue
        found = next((m for p in _ON_TYPE for m in p.finditer(finding.message)
                      if m["type"] in kinds), None)
        if found is None:
            return ""
        reasons.append(_reason(fn, args, finding, kinds[found["type"]], found["attr"],
                               arity=found.re is _ON_TYPE[2]))
    return reasons[0]


def _reason(fn: Any, args: tuple, finding: Any, index: int, attr: str, arity: bool) -> str:
    from gradsmith.discovery.slots import signature

    params = signature(fn)[1] if fn is not None else None
    name = params[index].name if params and index < len(params) and params[index].kind in (
        params[index].POSITIONAL_ONLY, params[index].POSITIONAL_OR_KEYWORD) else f"args[{index}]"
    where, _, raised = finding.message.partition(" raised ")
    what = (f"called {name}.{attr}() with arguments it does not take" if arity
            else f"needed {name} {attr}" if attr in _KINDS else f"used .{attr} on {name}")
    shown = repr(args[index])
    shown = shown if len(shown) <= 120 else shown[:117] + "..."
    lacks = ("which does not fit the call" if arity else "which is not" if attr in _KINDS
             else "which lacks it")
    return (f"{where} {what}, an object gradsmith synthesised ({shown}), {lacks} "
            f"({raised}): the error is the synthesised object's, not shown to be the "
            f"Function's. Fix: register example inputs with a real {name} "
            "(@gradsmith.example(lambda: (...)) above the class)")


_KINDS = ("callable", "subscriptable", "iterable")
_TAG = re.compile(r"'(?:Tensor|Parameter)' object has no attribute '(?P<attr>\w+)'.*?"
                  r"in (?P<method>\w+): `(?P<line>[^`]*)`", re.S)


def _tensor_tag(fn: Any, args: tuple, message: str) -> str:
    """Why ``'Tensor' object has no attribute 'tag'`` is the synthesis's (see the module
    docstring), or empty: the attribute is torch's own, or the line reads it off an incoming
    gradient, or no argument is a tensor."""
    import torch

    m = _TAG.search(message)
    if m is None or hasattr(torch.Tensor, m["attr"]) or not any(
            isinstance(a, torch.Tensor) for a in args):
        return ""
    owners = set(re.findall(rf"\b(\w+)\s*\.\s*{m['attr']}\b", m["line"]))
    if not owners or owners & _incoming(fn, m["method"]):
        return ""
    where, _, raised = message.partition(" raised ")
    return (f"{where} read .{m['attr']} off {', '.join(sorted(owners))}, a tensor gradsmith "
            f"synthesised ({raised}): real callers tag the tensor with attributes torch does "
            "not define (an engine setting up its parameters), and a fresh one has none, so "
            "the error is the synthesis's, not shown to be the Function's. Check it with "
            "tensors that carry the attributes, as the engine sets them")


def _incoming(fn: Any, method: str) -> set[str]:
    """Names of the gradients autograd hands ``method`` (backward's, jvp's), ctx excluded."""
    import inspect

    owner = getattr(fn, "__self__", None) or fn
    body = getattr(owner, method, None) if method in ("backward", "jvp") else None
    try:
        names = list(inspect.signature(body).parameters) if body is not None else []
    except (TypeError, ValueError):
        return set()
    return set(names[1:])
