"""Probability vectors: arguments a forward samples from (private).

``torch.multinomial(p, k)``, ``Categorical(probs=p)``, ``np.random.choice(n, p=p)`` are
written for a vector of non-negative entries summing to one; on random normal values they
raise ("probabilities are not non-negative") and the Function is skipped. Read, never run,
from forward (through ``p.cpu().numpy()`` and the like): such a ``p`` gets ``hint.simplex``
and is built as the softmax of random values (:func:`on_simplex`), whose entries are positive
and sum to one along the last dimension.
"""

from __future__ import annotations

import ast
from typing import Any

from gradsmith.discovery.source import call_name, parse

#: Samplers and distributions: the position of their probability argument, and its keyword.
_SAMPLERS = {"multinomial": (0, "input"), "Categorical": (0, "probs"),
             "OneHotCategorical": (0, "probs"), "Multinomial": (1, "probs"),
             "RelaxedOneHotCategorical": (1, "probs"), "choice": (None, "p")}
_THROUGH = {"detach", "cpu", "numpy", "clone", "contiguous", "double", "float", "to",
            "astype", "tolist"}


def read_simplexes(forward: Any, hints: dict) -> None:
    """Set ``hints[name].simplex`` (and ``probability``) for each parameter of ``forward``
    that it samples from.

    Example:
        >>> import numpy as np
        >>> from gradsmith.discovery.hints import Hint
        >>> def forward(ctx, outputs, probs):
        ...     idx = np.random.choice(len(probs), p=probs.cpu().numpy())
        ...     return outputs[idx]
        >>> hints = {"outputs": Hint(), "probs": Hint()}
        >>> read_simplexes(forward, hints)
        >>> hints["probs"].simplex, hints["outputs"].simplex
        (True, False)
    """
    tree = parse(forward)
    for node in ast.walk(tree) if tree is not None else ():
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = call_name(node)
        if name not in _SAMPLERS:
            continue
        position, keyword = _SAMPLERS[name]
        given = [k.value for k in node.keywords if k.arg == keyword]
        if position is not None and len(node.args) > position:
            given.append(node.args[position])
        if name == "multinomial" and isinstance(func, ast.Attribute) and not _namespace(func):
            given.append(func.value)  # p.multinomial(k)
        for arg in given:
            param = _param(arg, hints)
            if param is not None and hints[param].kind in (None, "tensor"):
                hints[param].simplex = hints[param].probability = True


def on_simplex(shape: tuple[int, ...], generator: Any) -> Any:
    """float64 softmax of standard normal values along the last dimension: positive entries
    that sum to one (a scalar shape: 1.0)."""
    import torch

    value = torch.randn(shape, dtype=torch.float64, generator=generator)
    return torch.softmax(value, dim=-1) if shape else torch.ones((), dtype=torch.float64)


def _namespace(func: ast.Attribute) -> bool:
    return isinstance(func.value, ast.Name) and func.value.id in ("torch", "np", "numpy")


def _param(node: ast.AST, hints: dict) -> str | None:
    while True:
        if isinstance(node, ast.Name):
            return node.id if node.id in hints else None
        if isinstance(node, ast.Attribute) and node.attr == "data":
            node = node.value
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in _THROUGH):
            node = node.func.value
        else:
            return None
