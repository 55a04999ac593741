"""Turn command-line targets into :class:`Source` records, without running user code.

A target is a Python file, a directory (every ``*.py`` below it), a dotted module or package,
or either of the first and third followed by ``::Name`` to pick one object. Everything a user
can get wrong here (missing path, syntax error, unknown module) raises
:class:`~gradsmith._errors.GradsmithUsageError`, which the CLI maps to exit code 2. Importing
the code happens later, in :mod:`gradsmith.discovery.collect`, possibly in a worker process.
"""

from __future__ import annotations

import ast
import difflib
import errno
import os
import stat
import sys
import tokenize
import weakref
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from gradsmith._errors import GradsmithUsageError
from gradsmith.discovery.static import locate_module, module_names

# Directories that hold tooling or third-party code, never the user's Functions.
_SKIP_DIRS = {"__pycache__", "node_modules", "site-packages", "build", "dist", "venv", "env"}
# Files that do something when imported (run a CLI, a build, pytest hooks): never walked into.
_SKIP_FILES = {"setup.py", "__main__.py", "conftest.py"}


@dataclass(frozen=True)
class Source:
    """One importable place to look for Functions.

    Attributes:
        kind: ``"file"`` (``location`` is an absolute path) or ``"module"`` (a dotted name).
        location: absolute file path or dotted module name.
        label: how rows from this source are named in reports (``ops.py``, ``pkg.ops``).
        names: objects picked with ``::Name``; ``None`` means every candidate.
        registered_only: list only objects with a registered example (the op catalog).
        include_reexports: also list objects defined elsewhere but re-exported here.
        problem: a reason this source cannot be imported, found before importing it (a syntax
            error in a file found by walking a directory); reported as an import error row.
        walked: a file found by walking a directory (not named by the user): one whose text
            shows it holds no candidate is not imported (see
            :func:`gradsmith.discovery.prefilter.needs_import`).
    """

    kind: str
    location: str
    label: str
    names: tuple[str, ...] | None = None
    registered_only: bool = False
    include_reexports: bool = False
    problem: str | None = None
    walked: bool = False


def resolve_targets(targets: list[str], cwd: str | os.PathLike | None = None) -> list[Source]:
    """Resolve command-line targets into sources, checking paths and syntax up front.

    Args:
        targets: strings as typed by the user: ``ops.py``, ``src/``, ``pkg.ops``,
            ``ops.py::Swish``, ``pkg.ops::Swish``.
        cwd: directory relative paths are resolved against (default: the current one).

    Returns:
        One :class:`Source` per file or module, in the order given (directories sorted).

    Raises:
        GradsmithUsageError: missing path, non-Python file, ``::Name`` on a directory, syntax
            error in a named file, or a dotted module that cannot be found.

    Example:
        >>> resolve_targets(["gradsmith.discovery.targets::Source"])[0].names
        ('Source',)
    """
    base = Path(cwd) if cwd is not None else Path.cwd()
    sources: list[Source] = []
    for target in targets:
        sources.extend(_resolve_one(target, base))
    return sources


def default_sources() -> list[Source]:
    """What ``gradsmith check`` verifies with no target: the embedded examples and the catalog.

    The catalog's objects are listed only when they carry a registered example, so a catalog
    that is still empty (or a private helper Function) adds nothing.
    """
    return [
        Source("module", "gradsmith.examples", "gradsmith.examples"),
        Source("module", "gradsmith.functional", "gradsmith.functional",
               registered_only=True, include_reexports=True),
        Source("module", "gradsmith.ops", "gradsmith.ops", registered_only=True),
    ]


def _resolve_one(target: str, base: Path) -> list[Source]:
    if not target.strip():  # Path("") is the current directory: never what was meant
        raise GradsmithUsageError(
            "check: an empty target (an unset shell variable?); pass a file, directory or "
            "dotted module, e.g. `ops.py` or `.` for the current directory")
    where, sep, name = target.partition("::")
    if sep and not _is_dotted(name):
        raise GradsmithUsageError(
            f"check: target {target!r} has an invalid name after '::' ({name!r}); expected "
            "`file.py::Name` or `package.module::Name` with a Python identifier, e.g. "
            "`ops.py::Swish`"
        )
    names = (name,) if sep else None
    path = Path(where) if Path(where).is_absolute() else base / where
    broken = link_problem(path) or special_file(path)
    if broken:
        raise GradsmithUsageError(f"check: target {target!r}: {broken}")
    if path.exists():
        return _from_path(target, path, names, base)
    if where.endswith(".py") or os.sep in where or "/" in where:
        raise GradsmithUsageError(
            f"check: target {target!r}: no such file or directory ({path}); fix the path, or "
            "pass a dotted module name such as `mypackage.ops`"
        )
    return [_from_module(target, where, names, base)]


def _from_path(target: str, path: Path, names: tuple[str, ...] | None, base: Path) -> list[Source]:
    if path.is_dir():
        if names is not None:
            raise GradsmithUsageError(
                f"check: target {target!r} names an object inside a directory; '::Name' needs "
                f"a file, e.g. `{path / 'ops.py'}::{names[0]}`"
            )
        files = _python_files(path)
        for file in files:
            broken = link_problem(file) or special_file(file)
            if broken:
                raise GradsmithUsageError(f"check: target {target!r}: {broken}")
        if not files:
            raise GradsmithUsageError(
                f"check: target {target!r}: directory {path} contains no .py files; pass a "
                "directory or file that defines torch.autograd.Function subclasses"
            )
        return [_file_source(f, None, base, strict=False) for f in files]
    if path.suffix != ".py":
        raise GradsmithUsageError(
            f"check: target {target!r} is not a Python file (expected a .py file, a directory "
            "or a dotted module name)"
        )
    if path.is_file() and repro_script(path):
        raise GradsmithUsageError(
            f"check: target {target!r} is a repro script gradsmith check --repro wrote, not "
            f"code to check; run it with `python {target}` (it prints REPRODUCED or NOT "
            "REPRODUCED)")
    return [_file_source(path, names, base, strict=True)]


def _file_source(path: Path, names: tuple[str, ...] | None, base: Path, strict: bool) -> Source:
    path = path.resolve()
    tree, problem = _parse(path)
    if problem and strict:
        raise GradsmithUsageError(f"check: cannot check {path}: {problem}; fix the file first")
    label = _label(path, base)
    if tree is not None and names:
        _check_names(tree, names, label)
    return Source("file", str(path), label, names=names, problem=problem, walked=not strict)


def _check_names(tree: ast.Module, names: tuple[str, ...], label: str) -> None:
    """``::Name`` must be bound at the module's top level, when the syntax tree can tell."""
    info = module_names(tree)
    for name in names:
        if not info.complete or name.split(".")[0] in info.names:
            continue
        close = difflib.get_close_matches(name, sorted(info.names), n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        listed = (f"candidates there: {', '.join(info.candidates)}" if info.candidates else
                  "it defines no torch.autograd.Function subclass and no function with a "
                  "registered example")
        raise GradsmithUsageError(f"check: {label} has no object named {name!r}; {hint}{listed}")


def link_problem(path: Path) -> str | None:
    """Why ``path`` (or a symbolic link on the way to it) cannot be followed, if it cannot.

    Example:
        >>> link_problem(Path(".")) is None
        True
    """
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return (f"{path} is a symbolic link loop (it points, directly or not, at itself); "
                    "remove the link or point it at a real file")
        if os.path.lexists(path):
            return (f"{path} is a symbolic link to {os.readlink(path)!r}, which does not "
                    "exist; remove the link or point it at a real file")
    return None


def special_file(path: Path) -> str | None:
    """Why ``path`` is not something to read as source, if it exists and is neither a regular
    file nor a directory: opening a FIFO blocks forever, a device like /dev/zero never ends.

    Example:
        >>> special_file(Path("/dev/null"))
        '/dev/null is a character device, not a regular file; pass Python files or directories'
    """
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    kind = ("a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "a character device" if stat.S_ISCHR(mode) else "a block device"
            if stat.S_ISBLK(mode) else "a special file")
    return f"{path} is {kind}, not a regular file; pass Python files or directories"


def _from_module(target: str, dotted: str, names: tuple[str, ...] | None, base: Path) -> Source:
    if not _is_dotted(dotted):
        raise GradsmithUsageError(
            f"check: target {target!r} is neither an existing path nor a dotted module name; "
            "pass e.g. `ops.py`, `src/`, `mypackage.ops` or `ops.py::Swish`"
        )
    # Found without importing: a package's __init__ is user code, run only in a worker.
    found = locate_module(dotted, base)
    if found.found is False:
        as_file = base / (dotted.replace(".", "/") + ".py")
        hint = (f"did you mean the file `{_label(as_file, base)}`?" if as_file.exists() else
                "check the spelling, install the package, or run from the directory that "
                "contains it")
        missing = f" (no module {found.missing!r})" if found.missing != dotted else ""
        raise GradsmithUsageError(
            f"check: target {target!r}: no file, directory or module named {dotted!r}"
            f"{missing}; {hint}"
        )
    if names and found.origin and found.origin.endswith(".py"):
        tree, _ = _parse(Path(found.origin))
        if tree is not None:
            _check_names(tree, names, dotted)
    return Source("module", dotted, dotted, names=names)


def _python_files(root: Path) -> list[Path]:
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in _SKIP_DIRS)
        found.extend(Path(dirpath) / f for f in sorted(filenames)
                     if f.endswith(".py") and f not in _SKIP_FILES
                     and not repro_script(Path(dirpath) / f))
    return found


def repro_script(path: Path) -> bool:
    """True for a script ``gradsmith check --repro`` wrote: it runs its reproduction at import
    (and exits), so checking it would only report that exit. Known by its first line (the
    marker), or by the docstring such scripts opened with before the marker existed."""
    from gradsmith.repro.script import MARKER

    if special_file(path):  # a FIFO would block the open forever: _parse reports it instead
        return False
    try:
        with open(path, "rb") as handle:
            head = handle.read(160).decode("utf-8", "replace")
    except OSError:
        return False
    return head.startswith(MARKER) or head.startswith(
        '"""Reproduce a gradsmith finding with plain PyTorch')


def _parse(path: Path) -> tuple[ast.Module | None, str | None]:
    """The file's syntax tree, or the reason it has none."""
    special = special_file(path)
    if special:
        return None, special
    try:
        with tokenize.open(path) as handle:
            return ast.parse(handle.read(), filename=str(path)), None
    except SyntaxError as exc:
        return None, f"syntax error at line {exc.lineno}: {exc.msg}"
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return None, f"cannot read it ({exc})"
    except (RecursionError, MemoryError):  # Python cannot compile it either: never imports
        return None, ("nested too deeply for Python's parser (it cannot be compiled, so it "
                      "cannot be imported)")


def _label(path: Path, base: Path) -> str:
    try:
        return str(path.relative_to(base.resolve()))
    except ValueError:
        return str(path)


def _is_dotted(name: str) -> bool:
    return bool(name) and all(part.isidentifier() for part in name.split("."))


def identity_key(obj: Any, module: ModuleType, attr: str) -> str:
    """What makes a candidate itself, for de-duplicating re-exports: the place its
    ``__qualname__`` names, when that place holds this very object (``pkg.ops.Swish``, the
    same wherever it is re-exported); else the attribute it is bound to here. Classes built
    by one factory share ``make.<locals>.Scaled``: each is its own target, keyed by the
    module attribute it is bound to (``Double``, ``WrongTriple``).

    Example:
        >>> import gradsmith.discovery.targets as here
        >>> identity_key(here.Source, here, "Alias")
        'gradsmith.discovery.targets.Source'
    """
    home_name = getattr(obj, "__module__", None) or module.__name__
    qualname = getattr(obj, "__qualname__", None) or attr
    home = sys.modules.get(home_name) if isinstance(home_name, str) else None
    if home is not None and "<locals>" not in qualname:
        found: Any = home
        try:
            for part in qualname.split("."):
                found = getattr(found, part, None)
        except Exception:  # noqa: BLE001 - a user object whose attribute access raises
            found = None
        if found is obj:
            return f"{home_name}.{qualname}"
    if home is not None:  # the first name its own module binds it to, whoever re-exports it
        attr = _bound_names(home).get(id(obj), attr)
        module = home
    return f"{home_name}.{qualname}@{module.__name__}.{attr}"


_BOUND: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _bound_names(module: ModuleType) -> dict[int, str]:
    """``id(value) -> first attribute name`` of a module, built once per module state (one
    pass over the module for all its candidates: listing stays linear)."""
    size = len(vars(module))
    cached = _BOUND.get(module)
    if cached is None or cached[0] != size:
        names: dict[int, str] = {}
        for name, value in list(vars(module).items()):
            names.setdefault(id(value), name)
        cached = _BOUND[module] = (size, names)
    return cached[1]
