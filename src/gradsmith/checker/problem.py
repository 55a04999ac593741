"""A function of a flat list of tensors with its analytic vector-Jacobian products.

Both first-order (the user's forward) and second-order (the user's backward as a function of
inputs and incoming gradient) checks are phrased as a :class:`Problem`, so the same numerics
compare them.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from gradsmith.checker.rng import seeded


class Problem:
    """``f: list[Tensor] -> list[Tensor]`` at a base point ``xs``.

    Args:
        f: deterministic function ``f(xs, fresh)``; returns the differentiable outputs.
            ``fresh`` holds the indices of ``xs`` that are new tensors the callee may consume;
            the others are shared with the base point and must be copied before use if the
            user code could modify them.
        xs: the base point (detached tensors, never modified).
        labels: one label per tensor of ``xs`` (used in findings).
        out_labels: one label per output (used in findings).
    """

    def __init__(self, f: Callable[[list[torch.Tensor], set[int]], list[torch.Tensor]],
                 xs: list[torch.Tensor], labels: list[str], out_labels: list[str] | None = None,
                 accumulate: set[int] | frozenset[int] = frozenset(),
                 complex_inputs: set[int] | frozenset[int] = frozenset(),
                 complex_outputs: set[int] | frozenset[int] = frozenset(),
                 backward_seed: int | None = None):
        self.f = f
        self.xs = [x.detach() for x in xs]
        self.labels = labels
        self._out_labels = out_labels
        self._graph: tuple[list[torch.Tensor], list[torch.Tensor]] | None = None
        self.out_shapes: list[torch.Size] = []
        # Inputs whose gradient a backward may accumulate into .grad instead of returning it
        # (parameters of module arguments: the checkpointing pattern's torch.autograd.backward).
        self.accumulate = set(accumulate)
        # Complex tensors are handled as real views (..., 2): element names say .real/.imag.
        self.complex_inputs, self.complex_outputs = set(complex_inputs), set(complex_outputs)
        # Backward runs from this CPU random state (restored afterwards), like forward: a
        # backward that draws samples is then a reproducible function of its inputs.
        self.backward_seed = backward_seed

    # -- evaluation ----------------------------------------------------------------------------
    def value(self, xs: list[torch.Tensor] | None = None,
              fresh: frozenset[int] = frozenset()) -> torch.Tensor:
        """All outputs flattened and concatenated (detached)."""
        with torch.no_grad():
            outs = self.f(list(self.xs if xs is None else xs), fresh)
        return _concat(outs)

    def shifted(self, t: int, delta: torch.Tensor) -> torch.Tensor:
        """``value`` with input ``t`` moved by ``delta`` (same shape as the input)."""
        xs = list(self.xs)
        xs[t] = xs[t] + delta
        return self.value(xs, frozenset((t,)))

    # -- analytic --------------------------------------------------------------------------------
    def linearize(self) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """One forward pass with a graph, kept until the next :meth:`vjp` consumes it."""
        if self._graph is None:
            leaves = [x.clone().requires_grad_(True) for x in self.xs]
            outs = self.f(leaves, set())
            self.out_shapes = [o.shape for o in outs]
            self._shaped = True
            self._graph = (leaves, outs)
        return self._graph

    def _shapes(self) -> None:
        if not getattr(self, "_shaped", False):
            self.linearize()

    @property
    def m(self) -> int:
        self._shapes()
        return sum(s.numel() for s in self.out_shapes)

    def split(self, v: torch.Tensor) -> list[torch.Tensor]:
        """Cut a flat output-space vector into output-shaped pieces."""
        pieces, start = [], 0
        for shape in self.out_shapes:
            n = shape.numel()
            pieces.append(v[start:start + n].reshape(shape))
            start += n
        return pieces

    def vjp(self, v: torch.Tensor, seed: int | None = None) -> list[torch.Tensor]:
        """Analytic ``J^T v`` per input (zeros where autograd reports no dependence), backward
        run from random state ``seed`` (default: :attr:`backward_seed`)."""
        leaves, outs = self.linearize()
        # Every backward gets a graph of its own, as in training: a backward may legitimately
        # write into the tensors it saved (fused losses scale their saved gradient in place),
        # so a second backward through the same graph would see its own leftovers.
        self._graph = None
        pieces = [p.to(o.dtype).clone() for p, o in zip(self.split(v), outs)]
        used = [(o, p) for o, p in zip(outs, pieces) if o.requires_grad]
        if not used:
            return [torch.zeros_like(x) for x in self.xs]
        for t in self.accumulate:
            leaves[t].grad = None
        seed = self.backward_seed if seed is None else seed
        grads = seeded_grad(seed, [o for o, _ in used], leaves, [p for _, p in used],
                            retain_graph=True, allow_unused=True)
        out = [torch.zeros_like(x) if g is None else g.detach() for g, x in zip(grads, self.xs)]
        for t in self.accumulate:
            if leaves[t].grad is not None:
                out[t] = out[t] + leaves[t].grad
        return out

    def out_label(self, i: int) -> str:
        """Label of flat output element ``i`` (e.g. ``out[1][2, 0]``)."""
        self._shapes()
        for k, shape in enumerate(self.out_shapes):
            if i < shape.numel():
                name = self._out_labels[k] if self._out_labels else (
                    "out" if len(self.out_shapes) == 1 else f"out[{k}]")
                return name + index_str(i, shape, k in self.complex_outputs)
            i -= shape.numel()
        return f"out[{i}]"

    def element(self, t: int, j: int) -> str:
        """Name of flat element ``j`` of input ``t`` (e.g. ``x[1, 2]``, ``z[3].imag``)."""
        return self.labels[t] + index_str(j, self.xs[t].shape, t in self.complex_inputs)


def seeded_grad(seed: int | None, *args, **kwargs):
    """``torch.autograd.grad(*args, **kwargs)`` from the replayed random state ``seed`` (None:
    the current state), the caller's state restored afterwards."""
    if seed is None:
        return torch.autograd.grad(*args, **kwargs)
    return seeded(seed, torch.autograd.grad, *args, **kwargs)


def index_str(flat: int, shape: torch.Size, real_view: bool = False) -> str:
    """``[i, j]`` multi-index of a flat position (empty for a scalar); for the real view of a
    complex tensor, the complex element's index and ``.real`` / ``.imag``."""
    if real_view:
        part = ".imag" if flat % 2 else ".real"
        return index_str(flat // 2, shape[:-1]) + part
    if len(shape) == 0:
        return ""
    idx = []
    for size in reversed(shape):
        idx.append(flat % size)
        flat //= size
    return "[" + ", ".join(str(i) for i in reversed(idx)) + "]"


def _concat(outs: list[torch.Tensor]) -> torch.Tensor:
    if not outs:
        return torch.zeros(0, dtype=torch.float64)
    dtype = outs[0].dtype
    if len(outs) == 1:
        return outs[0].detach().reshape(-1)
    return torch.cat([o.detach().reshape(-1).to(dtype) for o in outs])
