"""Resolve what to check and locate the tensors among the user's arguments.

The user's tensors are never touched: every evaluation gets fresh copies, converted to the
working dtype (float64 unless the Function cannot run in it).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._pytree import tree_flatten_with_path

from gradsmith._errors import GradsmithError
from gradsmith.checker.arguments import Arguments  # noqa: F401 - re-exported


@dataclass(frozen=True)
class Target:
    """The thing under test: a callable, plus its Function class when there is one."""

    call: Callable[..., Any]
    function_cls: type | None
    name: str


def resolve_target(fn: Any, name: str | None = None) -> Target:
    """Accept a Function subclass, its ``.apply``, or any callable of tensors."""
    if isinstance(fn, type) and issubclass(fn, torch.autograd.Function):
        return Target(fn.apply, fn, name or fn.__name__)
    owner = getattr(fn, "__self__", None)
    if (getattr(fn, "__name__", None) == "apply" and isinstance(owner, type)
            and issubclass(owner, torch.autograd.Function)):
        return Target(fn, owner, name or owner.__name__)
    if not callable(fn):
        raise GradsmithError(
            f"check: fn must be a torch.autograd.Function subclass, its .apply, or a callable "
            f"of tensors, got {type(fn).__name__} {fn!r}; pass e.g. `gradsmith.check(MyFn, x)`"
        )
    label = name or getattr(fn, "__qualname__", None) or type(fn).__name__
    return Target(fn, None, label)


def is_once_differentiable(cls: type | None) -> bool:
    """True when the Function's backward is wrapped by ``@once_differentiable``."""
    backward = getattr(cls, "backward", None) if cls is not None else None
    code = getattr(backward, "__code__", None)
    return code is not None and "once_differentiable" in getattr(code, "co_qualname", "")


def overrides(cls: type | None, method: str) -> bool:
    """True when a Function subclass defines ``method`` itself (not the base default)."""
    if cls is None:
        return False
    return getattr(cls, method, None) is not getattr(torch.autograd.Function, method, None)


def flatten_outputs(out: Any) -> list[torch.Tensor | None]:
    """Tensors of a (possibly nested) output, in order; non-tensors become None."""
    if isinstance(out, torch.Tensor):
        return [out]
    flat, _ = tree_flatten_with_path(out)
    return [leaf if isinstance(leaf, torch.Tensor) else None for _, leaf in flat]


def _parameter_names(target: Target, count: int) -> list[str]:
    fn = target.call
    skip = 0
    if target.function_cls is not None:
        fn = target.function_cls.forward
        skip = 0 if overrides(target.function_cls, "setup_context") else 1
    try:
        params = list(inspect.signature(fn).parameters.values())[skip:]
    except (TypeError, ValueError):
        params = []
    names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return names + [f"args[{i}]" for i in range(len(names), count)]
