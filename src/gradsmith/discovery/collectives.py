"""Which ``torch.distributed`` collectives a Function's own code calls (private).

A forward written ``if not dist.is_initialized(): return x`` runs its identity branch when no
process group exists, and checks there hold while the gather branch never ran (corpus 12d
held-out: an all-gather Function PASSed). :func:`called` reads the Function's forward, backward
and ``setup_context`` (and the module-level functions they call by name, one level) and names
the collectives they call on ``torch.distributed``: :mod:`gradsmith.checker.ranks` then says the
multi-rank branch was not exercised. Static reading only, no torch import here.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
import types
from typing import Any

# Communication that moves or combines values across ranks (a barrier moves none).
_WORDS = ("all_gather", "all_reduce", "reduce_scatter", "all_to_all", "broadcast", "gather",
          "scatter", "reduce", "send", "recv")
_METHODS = ("forward", "backward", "setup_context", "vjp", "jvp")


def _is_distributed(value: Any) -> bool:
    name = value.__name__ if isinstance(value, types.ModuleType) else \
        getattr(value, "__module__", None)
    return isinstance(name, str) and (name == "torch.distributed"
                                      or name.startswith("torch.distributed."))


def _collective(word: str) -> bool:
    plain = word.lower().lstrip("_")
    return any(w in plain for w in _WORDS)


def _tree(fn: Any) -> ast.AST | None:
    try:
        return ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return None


def _calls(tree: ast.AST, scope: dict) -> tuple[set[str], list[Any]]:
    """Collectives called in ``tree`` (``dist.all_gather(...)``, ``all_reduce(...)`` imported
    from torch.distributed) and the module-level functions it calls by bare name."""
    found: set[str] = set()
    helpers = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
                and _is_distributed(scope.get(func.value.id)) and _collective(func.attr):
            found.add(func.attr)
        elif isinstance(func, ast.Name) and func.id in scope:
            value = scope[func.id]
            if _is_distributed(value) and _collective(func.id):
                found.add(func.id)
            elif isinstance(value, types.FunctionType):
                helpers.append(value)
    return found, helpers


def called(fn: Any) -> list[str]:
    """The torch.distributed collectives ``fn`` (a Function class or a callable) calls in its
    own methods, or in module functions those call by name; sorted, empty when none."""
    owners = [k for k in getattr(fn, "__mro__", ()) if k is not object
              and not str(getattr(k, "__module__", "")).startswith("torch")]
    methods = [getattr(vars(k)[m], "__func__", vars(k)[m]) for k in owners for m in _METHODS
               if m in vars(k)] if owners else [fn]
    found: set[str] = set()
    for method in methods:
        scope = getattr(method, "__globals__", {})
        tree = _tree(method)
        if tree is None:
            continue
        direct, helpers = _calls(tree, scope)
        found |= direct
        for helper in helpers:
            inner = _tree(helper)
            if inner is not None:
                found |= _calls(inner, getattr(helper, "__globals__", {}))[0]
    return sorted(found)
