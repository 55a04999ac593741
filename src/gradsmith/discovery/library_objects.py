"""Arguments annotated with another library's class, which zero-config cannot invent (private).

``boundary_polygon: geometry.Polygon`` (corpus 11a dev: a floor-plan loss built on Shapely)
names an object of a geometry library: no tensor, number or callable gradsmith synthesises is
one, so every layout fails with that library's own error, which says nothing about why. A skip's
reason names such arguments and their classes, so the fix (register an example that builds
one) is plain.
"""

from __future__ import annotations

import inspect
import typing
from typing import Any

#: Modules whose classes synthesis knows how to make or that annotate plain values.
_KNOWN = frozenset({"builtins", "typing", "collections", "numbers", "torch", "numpy", "types"})


def library_objects(fn: Any) -> list[tuple[str, str]]:
    """``(parameter, "module.Class")`` for forward's parameters annotated with a class of a
    module outside the standard kinds (torch, NumPy, builtins, typing) and outside the
    Function's own module (a project's own class may be built from its code)."""
    forward = getattr(fn, "forward", fn) if isinstance(fn, type) else fn
    try:
        params = inspect.signature(forward).parameters.values()
    except (TypeError, ValueError):
        return []
    try:  # `from __future__ import annotations`: strings, resolved in forward's module
        hints = typing.get_type_hints(forward)
    except Exception:  # noqa: BLE001 - a name the module never defined: raw annotations
        hints = {}
    own = getattr(inspect.getmodule(forward), "__name__", "").split(".")[0]
    found = []
    for p in params:
        cls = hints.get(p.name, p.annotation)
        if not isinstance(cls, type) or cls is p.empty:
            continue
        top = (cls.__module__ or "").split(".")[0]
        if top in _KNOWN or top == own or top.startswith("_"):
            continue
        found.append((p.name, f"{cls.__module__}.{cls.__qualname__}"))
    return found


def objects_note(fn: Any) -> str:
    """The skip reason's sentence naming :func:`library_objects`, or ``""``."""
    found = library_objects(fn)
    if not found:
        return ""
    named = ", ".join(f"`{name}` is annotated `{cls}`" for name, cls in found)
    return (f"; {named}: an object of another library, which zero-configuration inputs cannot "
            "invent (register an example that builds one)")
