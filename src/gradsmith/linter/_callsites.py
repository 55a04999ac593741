"""Call sites of a Function: what its callers pass, evidence for the types of its inputs.

A forward parameter with a number as default (``scale=1.0``) reads as a number, but when a
linted call passes ``torch.ones(3)`` in that position it is a tensor too.
"""

from __future__ import annotations

import ast

from gradsmith.linter import _tensors as T
from gradsmith.linter._symbols import dotted as _dotted


def call_site_tensors(name: str, params: list[str], wanted: set[str], sym_of: dict,
                      torchish) -> set[str]:
    """Which of ``wanted`` some ``<name>.apply(...)`` call passes a torch-made tensor for.

    ``torchish(sym)`` gives a module's resolver of dotted names to torch names.
    """
    found: set[str] = set()
    needle = f"{name}.apply"
    for sym in sym_of.values():
        src = sym.source
        if needle not in src.text:
            continue
        resolve = torchish(sym)
        for node in _apply_calls(src):
            if _last(node.func.value) != name:
                continue
            for index, arg in enumerate(node.args):
                if isinstance(arg, ast.Starred):
                    break
                if index < len(params) and params[index] in wanted and _torch_made(arg, resolve):
                    found.add(params[index])
    return found


def apply_counts(name: str, sym_of: dict) -> set[int | None]:
    """Positional argument counts of the linted ``<name>.apply(...)`` calls (None: unknown,
    a ``*args`` or ``**kwargs`` hides the count)."""
    counts: set[int | None] = set()
    for node, _ in linted_applies(name, sym_of.values()):
        hidden = any(isinstance(a, ast.Starred) for a in node.args) or any(
            k.arg is None for k in node.keywords)
        counts.add(None if hidden else len(node.args))
    return counts


def linted_applies(name: str, symbols):
    """``(call, module symbols)`` for each ``<name>.apply(...)`` call in the modules of
    ``symbols`` (files whose text never spells ``<name>.apply`` are not walked)."""
    needle = f"{name}.apply"
    for sym in symbols:
        if needle not in sym.source.text:
            continue
        for node in _apply_calls(sym.source):
            if _last(node.func.value) == name:
                yield node, sym


def _apply_calls(src) -> list[ast.Call]:
    calls = src.__dict__.get("_gs_apply_calls")
    if calls is None:  # once per file, however many Functions ask
        calls = src.__dict__["_gs_apply_calls"] = [
            n for n in ast.walk(src.tree) if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute) and n.func.attr == "apply"]
    return calls


def _last(expr: ast.expr) -> str | None:
    return expr.attr if isinstance(expr, ast.Attribute) else getattr(expr, "id", None)


def _torch_made(expr: ast.expr, resolve) -> bool:
    """``torch.ones(3)``, ``torch.tensor(2.0)``: a call of torch that returns a tensor."""
    if not isinstance(expr, ast.Call):
        return False
    parts = _dotted(expr.func)
    qual = resolve(parts) if parts else None
    if not qual:
        return False
    module, _, fname = qual.rpartition(".")
    return module == "torch" and fname not in T.TORCH_NON_TENSOR and not fname[:1].isupper()


__all__ = ["apply_counts", "call_site_tensors", "linted_applies"]
