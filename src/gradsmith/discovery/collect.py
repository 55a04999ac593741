"""Import a :class:`~gradsmith.discovery.targets.Source` and list what it offers to check.

A candidate is a ``torch.autograd.Function`` subclass defined in the module, or any callable
with a registered example (see :func:`gradsmith.example`). Candidates travel to worker
processes as :class:`Ref` records (where to import from, which attribute), never as objects.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from gradsmith._errors import GradsmithUsageError
from gradsmith._example import examples_of
from gradsmith.discovery.file_import import import_file
from gradsmith.discovery.import_errors import import_note
from gradsmith.discovery.static import class_lines
from gradsmith.discovery.targets import Source, identity_key


class TargetImportError(Exception):
    """User code could not be imported; the message carries the user's traceback tail."""


@dataclass(frozen=True)
class Ref:
    """Where to find one candidate: a module (by file path or dotted name) and an attribute."""

    kind: str
    location: str
    attr: str
    label: str


@dataclass(frozen=True)
class Candidate:
    """One object to check, with the labels of its registered examples (empty: none).

    ``file`` and ``line`` say where it is defined (its ``class``/``def`` statement, or its first
    decorator), ``None`` when Python cannot tell (builtins, objects made at run time).
    """

    ref: Ref
    key: str
    examples: tuple[str, ...]
    file: str | None = None
    line: int | None = None


@dataclass
class Listing:
    """What a source offers: candidates, and modules that failed to import (label, message)."""

    candidates: list[Candidate] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)


def list_candidates(source: Source) -> Listing:
    """Import ``source`` and list its candidates in definition order.

    Args:
        source: a resolved target.

    Returns:
        A :class:`Listing`. A package lists its submodules too; one that fails to import is
        an entry in ``errors``, and the others are still listed.

    Raises:
        GradsmithUsageError: a name picked with ``::Name`` does not exist or cannot be checked.
        TargetImportError: the source itself cannot be imported.

    Example:
        >>> from gradsmith.discovery import Source, list_candidates
        >>> src = Source("module", "gradsmith.discovery.collect", "collect")
        >>> list_candidates(src).candidates
        []
    """
    if source.problem:
        raise TargetImportError(source.problem)
    module = load_module(source.kind, source.location)
    if source.names is not None:
        return Listing([_named(module, source, name) for name in source.names])
    listing = Listing(list(_members(module, source, source.label)))
    for sub_name in _submodules(module):
        try:
            sub = load_module("module", sub_name)
        except TargetImportError as exc:
            listing.errors.append((sub_name, str(exc)))
            continue
        listing.candidates.extend(_members(sub, Source("module", sub_name, sub_name,
                                                       registered_only=source.registered_only,
                                                       include_reexports=source.include_reexports),
                                           sub_name))
    return listing


def resolve_ref(ref: Ref) -> Any:
    """Import the module of ``ref`` and return the object it names."""
    return _getattr_path(load_module(ref.kind, ref.location), ref.attr)


def load_module(kind: str, location: str) -> ModuleType:
    """Import a module by dotted name or file path; user errors become TargetImportError.

    The module sees ``sys.argv`` as ``python FILE`` with no arguments gives it (restored after):
    research code often parses its command line at import (``args = parser.parse_args()``),
    which gradsmith's own arguments would make fail.
    """
    saved = sys.argv
    sys.argv = [location]
    try:
        if kind == "module":
            return importlib.import_module(location)
        return import_file(Path(location))
    except GradsmithUsageError:
        raise
    except BaseException as exc:  # user code: SystemExit and KeyboardInterrupt-like included
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise TargetImportError(_describe_exception(exc)) from None
    finally:
        sys.argv = saved


def _submodules(module: ModuleType) -> list[str]:
    path = getattr(module, "__path__", None)
    if path is None:
        return []
    # A package's __main__ runs its command line when imported: never walk into it.
    return sorted(info.name for info in pkgutil.walk_packages(path, module.__name__ + ".",
                                                              onerror=lambda _name: None)
                  if not info.name.endswith(".__main__"))


def _members(module: ModuleType, source: Source, label: str):
    for attr, obj in list(vars(module).items()):
        if attr.startswith("__"):
            continue
        defined_here = getattr(obj, "__module__", None) == module.__name__
        examples = _examples(obj)
        # A re-export that carries registered examples was put there to be checked
        # (`gradsmith check gradsmith.functional`); the run de-duplicates by key.
        if not (defined_here or source.include_reexports or examples):
            continue
        if is_function_class(obj) and _has_forward(obj):
            if source.registered_only and not examples:
                continue
        elif not (callable(obj) and examples):
            continue
        yield _candidate(module, source, label, attr, obj, examples)


def _named(module: ModuleType, source: Source, name: str) -> Candidate:
    try:
        obj = _getattr_path(module, name)
    except AttributeError:
        available = [c.ref.attr for c in _members(module, source, source.label)]
        hint = f"candidates there: {', '.join(available)}" if available else (
            "it defines no torch.autograd.Function subclass and no function with a registered "
            "example")
        raise GradsmithUsageError(
            f"check: {source.label} has no object named {name!r}; {hint}"
        ) from None
    if not callable(obj) or (isinstance(obj, type) and not is_function_class(obj)):
        raise GradsmithUsageError(
            f"check: {source.label}::{name} is a {type(obj).__name__}, expected a "
            "torch.autograd.Function subclass or a function of tensors"
        )
    return _candidate(module, source, source.label, name, obj, _examples(obj))


def _candidate(module: ModuleType, source: Source, label: str, attr: str, obj: Any,
               examples: list) -> Candidate:
    ref = Ref(source.kind if source.kind == "file" else "module",
              source.location if source.kind == "file" else module.__name__,
              attr, f"{label}::{attr}")
    key = identity_key(obj, module, attr)
    names = tuple(e.name or f"example{i}" for i, e in enumerate(examples))
    return Candidate(ref, key, names, *_where(obj))


def _where(obj: Any) -> tuple[str | None, int | None]:
    """Source file and line of ``obj``'s ``class``/``def`` statement, or ``(None, None)``."""
    try:
        target = obj if isinstance(obj, type) else inspect.unwrap(obj)
        file = inspect.getsourcefile(target)
        if not file:
            return None, None
        line = class_lines(file).get(target.__qualname__) if isinstance(target, type) else None
        if line is not None:  # one parse per file, not one per class (linear listing)
            return str(Path(file).resolve()), line
        lines, first = inspect.getsourcelines(target)
    except (TypeError, OSError, ValueError):  # builtins, C extensions, source not on disk
        return None, None
    # inspect starts at the first decorator; point at the statement itself, as editors do
    offset = next((i for i, text in enumerate(lines)
                   if text.lstrip().startswith(("class ", "def ", "async def "))), 0)
    return str(Path(file).resolve()), first + offset


def is_function_class(obj: Any) -> bool:
    """True for user subclasses of ``torch.autograd.Function`` (not torch's own classes)."""
    if not isinstance(obj, type):
        return False
    from torch.autograd import Function

    return (issubclass(obj, Function) and obj is not Function
            and not (obj.__module__ or "").startswith("torch."))


def _has_forward(cls: type) -> bool:
    from torch.autograd import Function

    return any("forward" in klass.__dict__ for klass in cls.__mro__
               if klass not in Function.__mro__)


def _examples(obj: Any) -> list:
    try:
        return examples_of(obj)
    except Exception:  # exotic objects whose attribute access raises are not candidates
        return []


def _getattr_path(module: ModuleType, dotted: str) -> Any:
    obj: Any = module
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def _describe_exception(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    user = [f for f in frames if "importlib" not in f.filename and "/gradsmith/" not in f.filename]
    where = f" at {user[-1].filename}:{user[-1].lineno}" if user else ""
    return f"{type(exc).__name__}: {exc}{where}{import_note(exc, frames)}"
