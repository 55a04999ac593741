"""Pooling windows: an argument forward hands to a pooling function as its window (private).

SNN_Activation_Driven's ``AdjustedAvgPoolFunc`` calls ``F.avg_pool2d(inputs, kernel)`` and
backward reads ``kernel[0] * kernel[1]``: synthesis made ``kernel`` a float and every layout
failed ("kernel_size must be tuple of ints, not float"). An argument in a pooling function's
``kernel_size``, ``stride`` or ``output_size`` place is a window: a tuple of ints, one per
spatial dimension of the function (2 each: the window pools and the output is not empty), and
the pooled tensor has a batch and a channel dimension before them. Read, never run.
"""

from __future__ import annotations

import ast
import re
from typing import Any

_POOL = re.compile(r"^(avg|max|lp|adaptive_avg|adaptive_max|fractional_max)_pool([123])d$")
_NAMESPACES = {"F", "functional", "torch", "nn"}


def read_windows(tree: ast.AST, hints: dict[str, Any]) -> None:
    """Set ``window`` (the number of spatial dimensions) on each parameter a pooling function
    of the torch namespace takes as its window, and ``rank_min`` on the tensor it pools.

    Example:
        >>> from gradsmith.discovery.hints import Hint
        >>> hints = {"x": Hint(), "k": Hint()}
        >>> read_windows(ast.parse("y = F.avg_pool2d(x, k)"), hints)
        >>> hints["k"].window, hints["x"].rank_min
        (2, 4)
    """
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and _namespaced(node.func.value)):
            continue
        match = _POOL.match(node.func.attr)
        if match is None:
            continue
        dims = int(match.group(2))
        first = 2 if match.group(1) == "lp" else 1  # lp_pool2d(x, norm_type, kernel_size)
        count = 1 if match.group(1).startswith(("adaptive", "fractional")) else 2
        windows = [*node.args[first:first + count],
                   *(k.value for k in node.keywords
                     if k.arg in ("kernel_size", "stride", "output_size"))]
        for window in windows:
            # an int the code says is an int stays one (pooling takes it, k * k needs it)
            if isinstance(window, ast.Name) and window.id in hints and \
                    hints[window.id].kind in (None, "float", "seq"):
                hints[window.id].window = dims
        pooled = node.args[0] if node.args else None
        if isinstance(pooled, ast.Name) and pooled.id in hints:
            hint = hints[pooled.id]
            hint.rank_min = max(hint.rank_min, dims + 2)


def _namespaced(node: ast.AST) -> bool:
    """``F``, ``torch.nn.functional``, ``nn.functional``."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name) and node.id in _NAMESPACES
