"""Kernels of a package outside the linted code, known by their forward twin (GS215).

A package written in torch operations has no use for a hand-written backward; one that
ships ``fftconv_fwd``/``fftconv_bwd`` or ``gat_forward``/``gat_backward`` side by side runs
a compiled kernel in each. Two forms are recognised:

- ``from fftconv import fftconv_fwd, fftconv_bwd``: both names imported from the same
  module that is not linted;
- ``import fused_gatconv`` and calls of ``fused_gatconv.gat_backward(...)`` and
  ``fused_gatconv.gat_forward(...)`` in the same file, the module (and every package
  above it) not linted and not a Python module of the project: ``Copy.backward(ctx, g)``
  of a Function imported from a linted module is Python code.
"""

from __future__ import annotations

import re

from gradsmith.linter._kernels import module_named, modules_of
from gradsmith.linter._project import is_python_module
from gradsmith.linter._symbols import ModuleSymbols

_BACKWARD_WORD = re.compile(r"(?<![a-z])(bwd|backward)(?![a-z])", re.I)
_FORWARD_WORD = {"bwd": "fwd", "backward": "forward", "BWD": "FWD", "BACKWARD": "FORWARD"}


def twin(name: str) -> str | None:
    """``name`` with its backward word made forward, or None when it has none."""
    if not _BACKWARD_WORD.search(name):
        return None
    return _BACKWARD_WORD.sub(lambda m: _FORWARD_WORD.get(m.group(1), "forward"), name)


def paired(parts: list[str], module: str, find) -> bool:
    """``parts`` is one name imported from ``module`` (not linted) beside its twin."""
    other = twin(parts[0]) if len(parts) == 1 else None
    return other is not None and find.external(other) == module


def paired_attribute(parts: list[str], sym: ModuleSymbols, sym_of: dict,
                     not_extension: frozenset[str]) -> str | None:
    """``mod.gat_backward`` of a module ``mod`` outside the linted code whose forward twin
    this file calls too; the module's name, else None."""
    if len(parts) != 2:
        return None
    other = twin(parts[1])
    target = sym.imports.get(parts[0])
    if other is None or target is None or target.partition(".")[0] in not_extension:
        return None
    if f"{parts[0]}.{other}(" not in sym.source.text:
        return None
    parts_of = target.split(".")
    for cut in range(len(parts_of), 0, -1):  # `Copy` from a linted `pkg.copy`: Python code
        prefix = ".".join(parts_of[:cut])
        if module_named(modules_of(sym_of), prefix, sym) is not None or is_python_module(
                prefix, sym):
            return None
    return target


__all__ = ["paired", "paired_attribute", "twin"]
