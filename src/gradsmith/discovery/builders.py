"""Settings objects the project's own code builds, for a Function that reads one (private).

``forward(ctx, grid, theta, params)`` reads ``params.B``, ``params.xmin``, ``params.nc`` and
passes them to a compiled extension that wants a float32 matrix, floats and an int of sizes
that fit each other. An invented namespace (``B=0.5``) is rejected, and no name says the
sizes. The project says them: some class of its package fills an object with exactly these
attributes (``self.params = Parameters(); self.params.nc = tess_size; ...; self.params.B =
self.tess.B``) or is one (``self.nc = nc`` in ``__init__``). :func:`built_settings` finds
such classes (read from the package's source, prefiltered by text), builds each with the
values its constructor states (its defaults; a required ``int``/``float``/``bool``/``str``
by its annotation; each option its docstring lists for a string parameter, one at a time:
``backend: Choose between "numpy", or "pytorch"``) and returns the attributes of what it
built. Synthesis tries those first; a build that raises is passed over. An object of which
forward only calls methods (``static_kernel.Gram_matrix(X, Y)``) is, likewise, each class of
the package that defines every method called, built with its defaults.

An invented namespace (no class of the project builds one) is an :class:`Invented`: it also
gets the attributes backward reads, directly or in the functions of the package it hands the
object to (``_backward_op_data(ctx.nufft, x, dy)`` reads ``nufft._grad_wrt_data`` and calls
``nufft.adj_op``): an attribute only backward reads was missing, and backward raised an
``AttributeError`` that was gradsmith's invention, not the Function's. What backward does with
an invented value is never shown to be the Function's error: the checker reports it as
unverified (see :mod:`gradsmith.checker.invented`), never as a defect.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import types
from pathlib import Path
from typing import Any

from gradsmith.discovery.backward_attributes import with_backward_reads
from gradsmith.discovery.slots import Slot, identity
from gradsmith.discovery.stated import documented_options

_MAX_FILES = 400      # a package's .py files read at most (text first: cheap)
_MAX_BUILDS = 6       # constructor calls tried per class
_REQUIRED = {int: 4, float: 0.5, bool: False}  # a required number: a small, non-degenerate one


class Built:
    """How to build an object the project builds (its class, constructor arguments and the
    attribute that holds it), what it held when built, and where from. Compared by identity:
    its tensors have no truth value."""

    __slots__ = ("cls", "kwargs", "holder", "items", "where")

    def __init__(self, cls: type, kwargs: dict[str, Any], holder: str, items: dict[str, Any],
                 where: str):
        self.cls, self.kwargs, self.holder = cls, kwargs, holder
        self.items, self.where = items, where

    def make(self) -> Any:
        """A fresh object (forward may change the one it is given): the project's own, with
        its methods (``params.copy()``), not a namespace of its attributes."""
        built = self.cls(**self.kwargs)
        return getattr(built, self.holder) if self.holder else built


class Invented(types.SimpleNamespace):
    """A config object synthesis invented (the attributes the code reads, each a value of the
    kind its use asks for). The class says so to the checker: an error backward raises on a
    line that uses one is not shown to be the Function's."""

    _gradsmith_invented = True


def with_built(plans: list[list[Slot]], owner: Any) -> list[list[Slot]]:
    """``plans`` with, first, copies whose config object (a ``SimpleNamespace`` of invented
    attributes) is one the project builds (:func:`built_settings`), one per build. Invented
    ones also get the attributes backward reads
    (:func:`~gradsmith.discovery.backward_attributes.backward_attributes`)."""
    plans = [with_backward_reads(plan, owner) for plan in plans]
    out: list[list[Slot]] = []
    for plan in plans:
        for i, slot in enumerate(plan):
            if slot.kind != "config" or not isinstance(slot.value, dict):
                continue
            called = [a for a, v in slot.value.items() if v is identity]
            read = [a for a in slot.value if a not in called]
            for built in built_settings(owner, read, called):
                out.append([*plan[:i], Slot(slot.name, "config", built, slot.hint,
                                            frozen=slot.frozen), *plan[i + 1:]])
            break
    return [*out, *plans]


def built_settings(owner: Any, attrs: list[str], called: list[str] = ()) -> list[Built]:
    """Objects the project builds that carry every name in ``attrs`` and have the methods
    ``called`` (each built once here to see that it does: ``Cpab(tess_size=4,
    backend='pytorch').params``); [] when none.

    Example:
        >>> built_settings(int, ["nc"])  # not a class of an importable package
        []
    """
    root, package = _package(owner)
    if root is None or not (attrs or called):
        return []
    found: list[Built] = []
    for module_name, klass, holder in _classes(root, package, set(attrs), set(called)):
        try:
            cls = getattr(importlib.import_module(module_name), klass)
        except Exception:  # noqa: BLE001 - the project's module does not import here
            continue
        for kwargs, shown in _builds(cls):
            try:
                built = cls(**kwargs)
                value = getattr(built, holder) if holder else built
                items = dict(vars(value))
            except Exception:  # noqa: BLE001 - this build is not one the class accepts
                continue
            if all(a in items for a in attrs) and all(hasattr(value, c) for c in called):
                found.append(Built(cls, kwargs, holder, items,
                                   f"{shown}.{holder}" if holder else shown))
    return found


def class_builds(cls: type) -> list[Built]:
    """``cls`` built with the values its constructor states (see :func:`_builds`), each build
    that runs once here; [] for an abstract class or one whose constructor needs an object.

    Example:
        >>> class Decay:
        ...     def __init__(self, rate: float = 0.5):
        ...         self.rate = rate
        >>> [(b.where, b.make().rate) for b in class_builds(Decay)]
        [('Decay()', 0.5)]
    """
    if inspect.isabstract(cls):
        return []
    found = []
    for kwargs, shown in _builds(cls):
        try:
            built = cls(**kwargs)
        except Exception:  # noqa: BLE001 - this build is not one the class accepts
            continue
        items = {k: v for k, v in vars(built).items() if not k.startswith("_")}
        found.append(Built(cls, kwargs, "", items, shown))
    return found


def _package(owner: Any) -> tuple[Path | None, str]:
    """The top package directory of ``owner``'s module and its dotted name."""
    module = inspect.getmodule(owner)
    name = getattr(module, "__name__", "") or ""
    path = getattr(module, "__file__", None)
    if not name or not path or "." not in name:
        return None, ""
    top = name.split(".")[0]
    folder = Path(path).resolve().parent
    for _ in name.split(".")[1:-1]:
        folder = folder.parent
    return (folder, top) if (folder / "__init__.py").is_file() else (None, "")


def _classes(root: Path, package: str, attrs: set[str], called: set[str] = frozenset()):
    """(module, class, holder) for each class whose methods assign every attribute in
    ``attrs``: on ``self.<holder>`` or (holder ``""``) on ``self``; with no ``attrs``, each
    class that defines every method in ``called`` (``static_kernel.Gram_matrix(X, Y)``: the
    project's kernel classes), holder ``""``."""
    files = sorted(root.rglob("*.py"))[:_MAX_FILES]
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if not all(f".{a}" in text for a in attrs) or (
                not attrs and not all(f"def {c}(" in text for c in called)):
            continue
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        parts = path.relative_to(root).with_suffix("").parts
        module = ".".join((package, *parts[:-1], *([] if parts[-1] == "__init__" else
                                                   parts[-1:])))
        for klass in tree.body:
            if isinstance(klass, ast.ClassDef) and not attrs:
                defined = {n.name for n in klass.body if isinstance(n, ast.FunctionDef)}
                if called <= defined:
                    yield module, klass.name, ""
            elif isinstance(klass, ast.ClassDef):
                for holder in _holders(klass, attrs):
                    yield module, klass.name, holder


def _holders(klass: ast.ClassDef, attrs: set[str]) -> list[str]:
    assigned: dict[str, set[str]] = {}
    for node in ast.walk(klass):
        targets = node.targets if isinstance(node, ast.Assign) else (
            [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else [])
        for target in targets:
            if not isinstance(target, ast.Attribute):
                continue
            value = target.value
            if isinstance(value, ast.Name) and value.id == "self":
                assigned.setdefault("", set()).add(target.attr)
            elif isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) \
                    and value.value.id == "self":
                assigned.setdefault(value.attr, set()).add(target.attr)
    return [holder for holder, names in assigned.items() if attrs <= names]


def _builds(cls: type) -> list[tuple[dict[str, Any], str]]:
    """Constructor arguments to try: the stated defaults (required ones by annotation), then
    each documented option of a string parameter in turn."""
    try:
        params = [p for p in inspect.signature(cls).parameters.values()
                  if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    except (TypeError, ValueError):
        return []
    options = documented_options(cls, [p.name for p in params])
    base: dict[str, Any] = {}
    for p in params:
        if p.default is not p.empty:
            continue
        kind = p.annotation if isinstance(p.annotation, type) else None
        if kind is None and isinstance(p.annotation, str):
            kind = {"int": int, "float": float, "bool": bool, "str": str}.get(p.annotation)
        if kind is str and options.get(p.name):
            base[p.name] = options[p.name][0]
        elif kind in _REQUIRED:
            base[p.name] = _REQUIRED[kind]
        else:
            return []  # a required object: nothing here says how to build it
    builds = [base]
    for name, values in options.items():
        default = next((p.default for p in params if p.name == name), None)
        builds += [{**base, name: v} for v in values if v not in (default, base.get(name))]
    return [(b, f"{cls.__name__}({', '.join(f'{k}={v!r}' for k, v in b.items())})")
            for b in builds[:_MAX_BUILDS]]

