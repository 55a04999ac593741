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
from torch.utils._pytree import keystr, tree_flatten_with_path, tree_unflatten

from gradsmith._errors import GradsmithError


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


class Arguments:
    """The user's positional arguments with every tensor located and labelled.

    Tensors may sit anywhere in nested lists, tuples and dicts. The differentiable ones are the
    floating-point tensors that require grad; if none does, all floating-point tensors.
    """

    def __init__(self, args: tuple, target: Target):
        flat, self._spec = tree_flatten_with_path(tuple(args))
        self._leaves = [leaf for _, leaf in flat]
        names = _parameter_names(target, len(args))
        self.labels = [_label(path, names) for path, _ in flat]
        self.top_index = [path[0].idx if path else 0 for path, _ in flat]
        self.tensor_pos = [i for i, v in enumerate(self._leaves) if isinstance(v, torch.Tensor)]
        floating = [i for i in self.tensor_pos if self._leaves[i].is_floating_point()]
        wanted = [i for i in floating if self._leaves[i].requires_grad]
        self.diff_pos = wanted or floating
        # Floating tensors left out because others require grad: treated as constants.
        self.constant_pos = [i for i in floating if i not in self.diff_pos]
        self.constant_labels = [self.labels[i] for i in self.constant_pos]
        self.n_args = len(args)
        self.values = tuple(args)  # as the user passed them (read only)

    @property
    def originals(self) -> list[torch.Tensor]:
        """The user's differentiable tensors (read only; never modified)."""
        return [self._leaves[i] for i in self.diff_pos]

    @property
    def diff_labels(self) -> list[str]:
        return [self.labels[i] for i in self.diff_pos]

    def working_copies(self, dtype: torch.dtype | None) -> list[torch.Tensor]:
        """Detached copies of the differentiable tensors, in ``dtype`` (None: user's dtype)."""
        return [t.detach().to(dtype or t.dtype, copy=True) for t in self.originals]

    def recast(self, dtype: torch.dtype) -> None:
        """From now on, work from copies of the user's floating tensors in ``dtype`` (for a
        Function that crashes in the dtype it was given); the user's tensors are untouched."""
        for i in self.tensor_pos:
            t = self._leaves[i]
            if t.is_floating_point():
                self._leaves[i] = t.detach().to(dtype).requires_grad_(t.requires_grad)

    def build(self, diff_values: list[torch.Tensor], dtype: torch.dtype | None,
              others: dict[int, torch.Tensor] | None = None) -> tuple:
        """The argument tuple with ``diff_values`` in place and fresh copies of other tensors.

        Floating tensors that are not differentiated are converted to ``dtype`` too, so a
        Function mixing them with the differentiated ones sees one consistent dtype.
        """
        leaves = list(self._leaves)
        skip = set(self.diff_pos)
        for i in self.tensor_pos:
            if i in skip:
                continue
            t = leaves[i]
            if others and i in others:
                leaves[i] = others[i]
            elif t.is_floating_point() and dtype is not None:
                leaves[i] = t.detach().to(dtype, copy=True)
            else:
                leaves[i] = t.detach().clone()
        for i, value in zip(self.diff_pos, diff_values):
            leaves[i] = value
        return tree_unflatten(leaves, self._spec)


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


def _label(path: tuple, names: list[str]) -> str:
    head = path[0].idx if path else 0
    base = names[head] if head < len(names) else f"args[{head}]"
    return base + keystr(path[1:])
