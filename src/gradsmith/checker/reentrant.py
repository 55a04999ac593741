"""Gradients through ``.backward()`` where a Function refuses ``torch.autograd.grad`` (private).

A reentrant checkpoint (``torch.utils.checkpoint`` with ``use_reentrant=True``, and the
projects' copies of its ``CheckpointFunction``) raises "incompatible with .grad()" by design
when differentiated with ``torch.autograd.grad`` or ``backward(inputs=...)``: its backward
re-runs the forward and calls ``.backward()`` itself, which only works from a plain
``.backward()``. The checks ask for gradients with ``torch.autograd.grad``; meeting that refusal
they would report a correct Function as a ``backward-error``. While :func:`backward_when_refused`
is active, a top-level ``torch.autograd.grad`` that meets the refusal is answered the way such a
Function is used: ``torch.autograd.backward`` on the same outputs and incoming gradients, the
inputs' ``.grad`` read and every reachable leaf's ``.grad`` put back as it was. The gradients are
the Function's own, so a wrong backward still fails. A call made inside a backward (the
Function's own ``torch.autograd.grad``) is left alone: a refusal there is the user's problem.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from gradsmith.checker.graph import graph_nodes

_REFUSAL = re.compile(r"(?:incompatible|not compatible) with \.grad\(\)")
_STATE = threading.local()
_LOCK = threading.Lock()
_ACTIVE = [0]
_ORIGINAL: list = []


def refused(exc: BaseException) -> bool:
    """True when ``exc`` is a reentrant checkpoint's refusal of ``torch.autograd.grad``.

    >>> refused(RuntimeError("When use_reentrant=True, torch.utils.checkpoint is incompatible"
    ...                      " with .grad() or passing an `inputs` parameter to .backward()."))
    True
    >>> refused(RuntimeError("size mismatch"))
    False
    """
    return isinstance(exc, RuntimeError) and bool(_REFUSAL.search(str(exc)))


@contextmanager
def backward_when_refused() -> Iterator[None]:
    """Route refused top-level ``torch.autograd.grad`` calls through ``.backward()`` (see the
    module); nests, and restores ``torch.autograd.grad`` when the outermost exits."""
    with _LOCK:
        if _ACTIVE[0] == 0:
            _ORIGINAL[:] = [torch.autograd.grad]
            torch.autograd.grad = _grad
        _ACTIVE[0] += 1
    try:
        yield
    finally:
        with _LOCK:
            _ACTIVE[0] -= 1
            if _ACTIVE[0] == 0:
                torch.autograd.grad = _ORIGINAL.pop()


def _grad(outputs: Any, inputs: Any, grad_outputs: Any = None, retain_graph: Any = None,
          create_graph: bool = False, only_inputs: bool = True, allow_unused: Any = None,
          is_grads_batched: bool = False, materialize_grads: bool = False) -> tuple:
    original = _ORIGINAL[0] if _ORIGINAL else torch.autograd.grad
    args = (outputs, inputs, grad_outputs, retain_graph, create_graph, only_inputs,
            allow_unused, is_grads_batched, materialize_grads)
    if torch.compiler.is_compiling() or getattr(_STATE, "depth", 0):
        return original(*args)  # traced by Dynamo, or inside a backward: torch's own grad
    _STATE.depth = 1
    try:
        try:
            return original(*args)
        except RuntimeError as exc:
            if not refused(exc) or is_grads_batched:
                raise
            ins = [inputs] if isinstance(inputs, torch.Tensor) else list(inputs)
            try:
                got = _through_backward(outputs, ins, grad_outputs, retain_graph, create_graph)
            except Exception:  # noqa: BLE001 - .backward() fails too: the refusal stands
                raise exc from None
            return _answer(ins, got, allow_unused, materialize_grads)
    finally:
        _STATE.depth = 0


def _through_backward(outputs: Any, ins: list, grad_outputs: Any, retain_graph: Any,
                      create_graph: bool) -> dict[int, torch.Tensor]:
    """The gradients of ``ins`` (by position; absent where unused) from
    ``torch.autograd.backward``, every reachable leaf's ``.grad`` put back afterwards."""
    outs = [outputs] if isinstance(outputs, torch.Tensor) else list(outputs)
    if grad_outputs is not None and isinstance(grad_outputs, torch.Tensor):
        grad_outputs = [grad_outputs]
    by_id = {id(t): t for t in ins if t.is_leaf}
    by_id.update(_leaf_map(outs))
    kept = {i: t.grad for i, t in by_id.items()}
    got: dict[int, torch.Tensor] = {}
    handles = [t.register_hook(lambda g, k=k: got.__setitem__(k, got[k] + g if k in got else g))
               for k, t in enumerate(ins) if not t.is_leaf and t.requires_grad]
    try:
        for t in by_id.values():
            t.grad = None
        torch.autograd.backward(outs, grad_outputs, retain_graph=retain_graph,
                                create_graph=create_graph)
        for k, t in enumerate(ins):
            if t.is_leaf and t.grad is not None:
                got[k] = t.grad
    finally:
        for h in handles:
            h.remove()
        for i, t in by_id.items():
            t.grad = kept.get(i)
    return got


def _answer(ins: list, got: dict[int, torch.Tensor], allow_unused: Any,
            materialize_grads: bool) -> tuple:
    """``torch.autograd.grad``'s tuple, with its handling of unused inputs."""
    result = []
    for k, t in enumerate(ins):
        g = got.get(k)
        if g is None and materialize_grads:
            g = torch.zeros_like(t)
        if g is None and not allow_unused:
            raise RuntimeError("One of the differentiated Tensors appears to not have been "
                               "used in the graph. Set allow_unused=True if this is the "
                               "desired behavior.")
        result.append(g)
    return tuple(result)


def _leaf_map(outs: list) -> dict[int, torch.Tensor]:
    """The leaves (``AccumulateGrad`` variables) reachable from ``outs``' graph, by id."""
    found: dict[int, torch.Tensor] = {}
    for node in graph_nodes(outs):
        var = getattr(node, "variable", None)
        if isinstance(var, torch.Tensor):
            found[id(var)] = var
    for o in outs:
        if o.is_leaf and o.requires_grad:
            found[id(o)] = o
    return found
