"""Invented function arguments, for Functions whose backward calls a function it was given.

Some Functions take a function of tensors that forward only stores on ctx and backward calls
(an ODE solver's event-time trick: ``func(t, y)`` for the dynamics, ``vjp(event_fn, (t, y))``
for the event's derivative). Forward runs whatever is passed, so only a probe of backward can
tell whether invented inputs fit. :class:`SyntheticFn` is such a function: plain (no
parameters, so no extra inputs to check), depending on every tensor it is given, returning
either a tensor shaped like its last argument (``dy/dt = f(t, y)``) or a single number (an
event function, ``c(t, y)``); synthesis tries both, and keeps the first whose backward runs.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from typing import Any


class SyntheticFn:
    """``tanh(last) * weight + mean(tanh(each other))`` of its tensor arguments, summed to a
    single number when ``reduce``; ``source`` is the same function as a Python lambda.

    Example:
        >>> import torch
        >>> f = SyntheticFn(0.75, reduce=True)
        >>> t, y = torch.tensor(0.5), torch.ones(3)
        >>> bool(torch.isclose(f(t, y), eval(f.source, {"torch": torch})(t, y)))
        True
        >>> bool(torch.isclose(f(y, 0.5), eval(f.source, {"torch": torch})(y, 0.5)))
        True
    """

    def __init__(self, weight: float, reduce: bool = False) -> None:
        self.weight = float(weight)
        self.reduce = bool(reduce)
        body = (f"torch.tanh(t[-1]) * {self.weight!r} "
                "+ sum(torch.tanh(a).mean() for a in t[:-1])")
        body = f"({body}).sum()" if self.reduce else body
        # its tensor arguments only, as __call__ (a threshold passed as a float is not one)
        self.source = (f"lambda *a: (lambda t: {body})("
                       "[v for v in a if isinstance(v, torch.Tensor)])")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        import torch

        t = [a for a in args if isinstance(a, torch.Tensor)]
        out = torch.tanh(t[-1]) * self.weight + sum(torch.tanh(a).mean() for a in t[:-1])
        return out.sum() if self.reduce else out

    def __repr__(self) -> str:
        reduced = ", summed" if self.reduce else ""
        return f"fn(*t) = tanh(t[-1]) * {self.weight:g} + mean(tanh(t[:-1])){reduced}"

    def __reduce__(self) -> tuple:
        return SyntheticFn, (self.weight, self.reduce)


def pairwise_distance(a: Any, b: Any) -> Any:
    """Euclidean distances between the rows of ``a`` and of ``b`` (``torch.cdist``): what a
    function argument named as a distance (``dist_func``) is called to compute."""
    import torch

    return torch.cdist(a, b)


def squared_distance(a: Any, b: Any) -> Any:
    """Squared Euclidean distances between rows (``sq_dist_func``, ``sqdist``)."""
    import torch

    return torch.cdist(a, b) ** 2


_DISTANCE_WORDS = {"dist", "distance", "sqdist", "cdist", "distances"}
_SQUARED_WORDS = {"sq", "sqdist", "squared", "square"}


def distance_kind(name: str) -> str | None:
    """``"squared"`` or ``"plain"`` for a function argument whose name says it computes
    distances (its words: ``sq_dist_func``, ``dist_fn``, ``squared_distance``), else None.
    A Function's backward may rely on what such a function computes (an RBF kernel's
    lengthscale gradient holds for a squared distance only): an invented one gives a false
    gradient-mismatch.

    Example:
        >>> distance_kind("sq_dist_func"), distance_kind("dist_func"), distance_kind("fn")
        ('squared', 'plain', None)
    """
    words = set(name.lower().strip("_").split("_"))
    if not words & _DISTANCE_WORDS:
        return None
    return "squared" if words & _SQUARED_WORDS else "plain"


def flavours(count: int) -> list[tuple[bool, ...]]:
    """The ``reduce`` flags to try for ``count`` function arguments (tensor-valued first)."""
    out: list[tuple[bool, ...]] = [()]
    for _ in range(min(count, 3)):
        out = [(*f, r) for f in out for r in (False, True)]
    return out


def probe_backward(call: Callable[..., Any], args: list) -> bool | str:
    """Forward and backward on ``args``: True when both run with finite results, False when
    they run with non-finite ones, the error otherwise."""
    import torch

    try:
        with torch.enable_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = call(*args)
            items = out if isinstance(out, (tuple, list)) else (out,)
            outs = [o for o in items if isinstance(o, torch.Tensor) and o.requires_grad]
            leaves = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
            if not outs or not leaves:
                return "forward returned no differentiable output"
            grads = torch.autograd.grad(outs, leaves, [torch.ones_like(o) for o in outs],
                                        allow_unused=True)
    except Exception as exc:  # noqa: BLE001 - the probe failing is expected
        text = str(exc)
        return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"
    return all(bool(torch.isfinite(o).all()) for o in outs if o.is_floating_point()) and all(
        g is None or bool(torch.isfinite(g).all()) for g in grads)


def called_in_helpers(target: Any, owner: Any, names: list[str]) -> set[str]:
    """The arguments forward hands to a helper of its own module or class that calls them
    (``Owner.quadrature(f, a, b, n)`` ... ``f(nodes)``), a few calls deep: callables, whatever
    their annotation's first word (``Callable[[Tensor], Tensor]`` names a tensor too).

    Example:
        >>> def integrate(g, lo, hi):
        ...     return (hi - lo) * g((lo + hi) / 2)
        >>> def forward(ctx, g, lo, hi):
        ...     return integrate(g, lo, hi)
        >>> sorted(called_in_helpers(forward, None, ["g", "lo", "hi"]))
        ['g']
    """
    import ast

    called = set()
    for helper, passed in _helpers(target, owner, names):
        called |= {passed[node.func.id] for node in ast.walk(helper)
                   if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                   and node.func.id in passed}
    return called


def none_tested_in_helpers(target: Any, owner: Any, names: list[str]) -> set[str]:
    """The arguments forward hands to a helper of its own module or class that compares them
    with None (``if eval_func is not None: saved.append(eval_func(r))``), a few calls deep:
    optional there, so tried as None first (see :func:`~gradsmith.discovery.slots.plan_slots`).
    An invented callable for an optional hook changes what forward returns (``x`` becomes
    ``(x, saved)``), and backward then fails on inputs no caller passes by default.

    Example:
        >>> def solve(b, hook):
        ...     return b if hook is None else (b, hook(b))
        >>> def forward(ctx, b, hook):
        ...     return solve(b, hook)
        >>> sorted(none_tested_in_helpers(forward, None, ["b", "hook"]))
        ['hook']
    """
    import ast

    tested = set()
    for helper, passed in _helpers(target, owner, names):
        for node in ast.walk(helper):
            if not isinstance(node, ast.Compare):
                continue
            sides = [node.left, *node.comparators]
            if any(isinstance(s, ast.Constant) and s.value is None for s in sides):
                tested |= {passed[s.id] for s in sides
                           if isinstance(s, ast.Name) and s.id in passed}
    return tested


def _helpers(target: Any, owner: Any, names: list[str]) -> Iterator[tuple[Any, dict[str, str]]]:
    """The helpers of ``target``'s module, class or package it hands ``names`` to, a few calls
    deep, each with its parameter -> our parameter (see
    :func:`~gradsmith.discovery.callees.followed`); none when its source cannot be read."""
    from gradsmith.discovery.callees import followed
    from gradsmith.discovery.source import parse

    tree = parse(target)
    if tree is None:
        return iter(())
    klass = owner if isinstance(owner, type) else None
    return followed(target, tree, {n: n for n in names}, klass, package=True)
