"""Arguments that are a dtype or a device (private).

Forwards that build tensors take the dtype and device to build them with: ``dtype:
torch.dtype``, ``torch.zeros(n, dtype=dtype, device=device)``, ``x.to(dtype)``. Synthesis
made them 0.1 (an unnamed float), so every layout failed. Read, never run, from forward's
annotations and calls: a parameter annotated ``torch.dtype``/``torch.device``, or passed as
the ``dtype=``/``device=`` keyword of any call, gets the dtype of the synthesised tensors
(float64, or float32 when those are) and the device they are placed on.
"""

from __future__ import annotations

import ast
import inspect
from typing import Any

from gradsmith.discovery.source import parse as _parse

KINDS = ("dtype", "device")


def dtype_arguments(forward: Any, names: list[str]) -> dict[str, str]:
    """name -> ``"dtype"`` or ``"device"`` for the parameters of ``forward`` used as one.

    Example:
        >>> import torch
        >>> def forward(ctx, n, kind, where: torch.device):
        ...     return torch.zeros(n, dtype=kind, device=where)
        >>> dtype_arguments(forward, ["n", "kind", "where"])
        {'where': 'device', 'kind': 'dtype'}
    """
    found: dict[str, str] = {}
    try:
        params = inspect.signature(forward).parameters
    except (TypeError, ValueError):
        params = {}
    for name in names:
        p = params.get(name)
        text = "" if p is None or p.annotation is p.empty else str(p.annotation)
        for kind in KINDS:
            if text in (f"torch.{kind}", f"<class 'torch.{kind}'>"):
                found[name] = kind
    tree = _parse(forward)
    for node in ast.walk(tree) if tree is not None else ():
        if not isinstance(node, ast.Call):
            continue
        for keyword in node.keywords:
            if keyword.arg in KINDS and isinstance(keyword.value, ast.Name) and \
                    keyword.value.id in names:
                found.setdefault(keyword.value.id, keyword.arg)
    return found


def with_dtypes(slots: list, kinds: dict[str, str], required: set[str]) -> list:
    """The plan with each required dtype or device parameter of that kind (one with a default
    keeps it: the code says what it does without one)."""
    from gradsmith.discovery.slots import Slot

    return [Slot(s.name, kinds[s.name], None, s.hint) if s.name in kinds and s.name in required
            else s for s in slots]
