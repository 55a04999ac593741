"""The autograd graph behind some outputs, walked once (private)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any


def graph_nodes(outs: Iterable[Any]) -> Iterator[Any]:
    """Each node of the autograd graph behind the tensors ``outs`` (None entries and tensors
    without a ``grad_fn`` skipped), once, depth first from the outputs.

    Example:
        >>> import torch
        >>> x = torch.ones(2, requires_grad=True)
        >>> [type(n).__name__ for n in graph_nodes([(x * 2).sum()])]
        ['SumBackward0', 'MulBackward0', 'AccumulateGrad']
    """
    seen: set[int] = set()
    stack = [o.grad_fn for o in outs if o is not None and o.grad_fn is not None]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        yield node
        stack.extend(n for n, _ in getattr(node, "next_functions", ()))
