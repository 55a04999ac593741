"""Python source for the example arguments of a printed declaration line.

``@gradsmith.example(lambda: (...), surrogate=...)``: the arguments the check used, written so
that the pasted line runs and, where the declaration was checked, checks what was measured
(:mod:`gradsmith.checker.suggest` prints the lines; :mod:`gradsmith.checker.object_source`
writes modules its class builds with no arguments).
"""

from __future__ import annotations

import types
from typing import Any

import torch

from gradsmith.checker import object_source
from gradsmith.checker.invented import synthetic_function


def render_args(args: tuple, by_value: int = 0, home: str | None = None) -> str:
    """Python source for an argument tuple: tensors as ``torch.randn(shape)`` with their dtype
    (0-dim floating tensors by value; every tensor of at most ``by_value`` elements too),
    ``torch.device``/``torch.dtype``/``torch.Size`` as their constructors, other values by
    ``repr``; an object its class builds with no arguments as ``Cls()`` (``home``: the module
    the line is pasted into; :mod:`gradsmith.checker.object_source`); ``...`` where no
    literal exists (other modules, objects)."""
    any_grad = any(isinstance(a, torch.Tensor) and a.requires_grad for a in flat(args))
    mixed = any_grad and any(isinstance(a, torch.Tensor) and a.is_floating_point()
                             and not a.requires_grad for a in flat(args))
    items = [_render(a, mixed, by_value, home) for a in args]
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def has_placeholder(line: str) -> bool:
    """Whether a declaration line holds ``...`` (:func:`render_args`' argument without
    source, or a template's body) outside string literals: it cannot pass as printed."""
    import io
    import tokenize

    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(line).readline))
    except (tokenize.TokenError, SyntaxError):
        return "..." in line
    return any(t.type == tokenize.OP and t.string == "..." for t in tokens)


def flat(args) -> list:
    """The leaves of nested lists, tuples and dicts of arguments."""
    out = []
    for a in args:
        out += flat(a) if isinstance(a, (list, tuple)) else (
            flat(list(a.values())) if isinstance(a, dict) else [a])
    return out


#: A floating tensor that is not differentiated (where others are) and has at most this many
#: elements is written by value: it is configuration (clip bounds, a scale per channel) that a
#: fitted declaration's numbers were checked against, and a fresh ``torch.randn`` in the
#: pasted line gives other bounds than the checked ``x.clamp(-0.7, 0.6)`` (corpus 5 dev:
#: BiBERT's SymQuantizer printed a checked line that failed as pasted).
BY_VALUE = 16


def _render(a: Any, mark_grad: bool, by_value: int = 0, home: str | None = None) -> str:
    if isinstance(a, torch.Tensor):
        dtype = "" if a.dtype == torch.float32 else f", dtype={a.dtype}"
        setting = mark_grad and a.is_floating_point() and not a.requires_grad
        if (a.dim() == 0 or (not a.is_floating_point() and a.numel() <= 8)
                or (setting and a.numel() <= BY_VALUE) or a.numel() <= by_value):
            text = f"torch.tensor({a.detach().tolist()!r}{dtype})"
        elif a.is_floating_point():
            text = f"{_scale(a)}torch.randn({', '.join(map(str, a.shape))}{dtype})"
        else:
            text = f"torch.zeros({tuple(a.shape)}{dtype})"
        return text + (".requires_grad_()" if mark_grad and a.requires_grad else "")
    if isinstance(a, torch.device):  # repr "device(type='cpu')" is no source (DeepRobust)
        return f"torch.device({str(a)!r})"
    if isinstance(a, (torch.dtype, torch.Size)):  # "torch.float64", "torch.Size([3, 4])"
        return repr(a)
    if isinstance(a, (list, tuple)):
        inner = ", ".join(_render(x, mark_grad, by_value) for x in a)
        return f"[{inner}]" if isinstance(a, list) else f"({inner}{',' if len(a) == 1 else ''})"
    if isinstance(a, dict):
        return "{" + ", ".join(f"{k!r}: {_render(v, mark_grad, by_value)}"
                               for k, v in a.items()) + "}"
    if a is None or isinstance(a, (bool, int, float, str)):
        return repr(a)
    if synthetic_function(a):
        return a.source  # the function synthesis invented for a function argument
    if isinstance(a, types.SimpleNamespace):  # a config object: the same attributes
        items = ", ".join(f"{k!r}: " + ("staticmethod(lambda t, *a, **k: t)" if getattr(
            v, "__module__", None) == "gradsmith.discovery.slots" else _render(v, mark_grad))
            for k, v in vars(a).items())
        return f"type('Config', (), {{{items}}})()"
    return object_source.source(a, home) or "..."


def _scale(a: torch.Tensor) -> str:
    """``"0.3 * "`` for a tensor of at least 12 elements whose root mean square is below 0.4,
    else ``""``.

    Standard-normal values that small are a chance below 1e-3: such a tensor was put there
    (the discovery scales inputs into an estimator's window around 0,
    :mod:`gradsmith.discovery.magnitudes`), and a pasted ``torch.randn`` would miss the window
    again and verify nothing (corpus 12c held-out: auto_LiRPA's SignMergeFunction_tight)."""
    values = a.detach()
    if values.numel() < 12 or not bool(torch.isfinite(values).all()):
        return ""
    rms = float(values.double().pow(2).mean().sqrt())
    return f"{rms:.1g} * " if 0 < rms < 0.4 else ""
