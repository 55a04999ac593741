"""Turn command-line targets into :class:`Source` records, without running user code.

A target is a Python file, a directory (every ``*.py`` below it), a dotted module or package,
or either of the first and third followed by ``::Name`` to pick one object. Everything a user
can get wrong here (missing path, syntax error, unknown module) raises
:class:`~gradsmith._errors.GradsmithUsageError`, which the CLI maps to exit code 2. Importing
the code happens later, in :mod:`gradsmith.discovery.collect`, possibly in a worker process.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import tokenize
from dataclasses import dataclass
from pathlib import Path

from gradsmith._errors import GradsmithUsageError

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
    """

    kind: str
    location: str
    label: str
    names: tuple[str, ...] | None = None
    registered_only: bool = False
    include_reexports: bool = False
    problem: str | None = None


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
    where, sep, name = target.partition("::")
    if sep and not _is_dotted(name):
        raise GradsmithUsageError(
            f"check: target {target!r} has an invalid name after '::' ({name!r}); expected "
            "`file.py::Name` or `package.module::Name` with a Python identifier, e.g. "
            "`ops.py::Swish`"
        )
    names = (name,) if sep else None
    path = Path(where) if Path(where).is_absolute() else base / where
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
    return [_file_source(path, names, base, strict=True)]


def _file_source(path: Path, names: tuple[str, ...] | None, base: Path, strict: bool) -> Source:
    path = path.resolve()
    problem = _syntax_problem(path)
    if problem and strict:
        raise GradsmithUsageError(f"check: cannot check {path}: {problem}; fix the file first")
    return Source("file", str(path), _label(path, base), names=names, problem=problem)


def _from_module(target: str, dotted: str, names: tuple[str, ...] | None, base: Path) -> Source:
    if not _is_dotted(dotted):
        raise GradsmithUsageError(
            f"check: target {target!r} is neither an existing path nor a dotted module name; "
            "pass e.g. `ops.py`, `src/`, `mypackage.ops` or `ops.py::Swish`"
        )
    try:
        spec = importlib.util.find_spec(dotted)
    except Exception as exc:  # a parent package failed to import: user code, so usage error
        raise GradsmithUsageError(
            f"check: target {target!r}: importing the parent package of {dotted!r} failed with "
            f"{type(exc).__name__}: {exc}; fix that import error first"
        ) from None
    if spec is None:
        as_file = base / (dotted.replace(".", "/") + ".py")
        hint = (f"did you mean the file `{_label(as_file, base)}`?" if as_file.exists() else
                "check the spelling, install the package, or run from the directory that "
                "contains it")
        raise GradsmithUsageError(
            f"check: target {target!r}: no file, directory or module named {dotted!r}; {hint}"
        )
    return Source("module", dotted, dotted, names=names)


def _python_files(root: Path) -> list[Path]:
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in _SKIP_DIRS)
        found.extend(Path(dirpath) / f for f in sorted(filenames)
                     if f.endswith(".py") and f not in _SKIP_FILES)
    return found


def _syntax_problem(path: Path) -> str | None:
    try:
        with tokenize.open(path) as handle:
            ast.parse(handle.read(), filename=str(path))
    except SyntaxError as exc:
        return f"syntax error at line {exc.lineno}: {exc.msg}"
    except (OSError, UnicodeDecodeError) as exc:
        return f"cannot read it ({exc})"
    return None


def _label(path: Path, base: Path) -> str:
    try:
        return str(path.relative_to(base.resolve()))
    except ValueError:
        return str(path)


def _is_dotted(name: str) -> bool:
    return bool(name) and all(part.isidentifier() for part in name.split("."))
