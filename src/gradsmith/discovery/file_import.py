"""Import a module from its file path, as ``python FILE`` or its package would (private).

A file inside a package is imported as the package's member (its relative imports work). When
that fails in the package's ``__init__`` or a sibling, not in the file, and the file imports
nothing relative to its package, it is imported alone, as ``python FILE`` runs it (issue 18,
corpus 8b: a two-class quantizer file in a package whose ``__init__`` needs a detection library
that is not installed). A standalone file gets a name that cannot clash with an installed module.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.util
import sys
import traceback
from pathlib import Path
from types import ModuleType


def import_file(path: Path) -> ModuleType:
    """The module at ``path``; what it raises on import propagates."""
    package_parts, root = _package_of(path)
    if package_parts:
        name = ".".join(package_parts + ([] if path.stem == "__init__" else [path.stem]))
        if str(root) not in sys.path:
            sys.path.insert(0, str(root))
        try:
            module = importlib.import_module(name)
        except Exception as exc:
            if _reached(exc, path) or _relative_imports(path):
                raise
            # The package's __init__ (or a sibling it imports) failed, not the file: a file
            # that imports nothing relative is importable alone, as `python FILE` runs it.
            try:
                return _standalone(path)
            except Exception:
                raise exc from None
        if Path(getattr(module, "__file__", "") or "").resolve() == path.resolve():
            return module
    return _standalone(path)


def _reached(exc: BaseException, path: Path) -> bool:
    """Whether ``exc``'s traceback ran ``path``'s own code."""
    here = path.resolve()
    return any(Path(f.filename).resolve() == here
               for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith("<"))


def _relative_imports(path: Path) -> bool:
    try:
        return any(isinstance(n, ast.ImportFrom) and n.level
                   for n in ast.walk(ast.parse(path.read_text(errors="replace"))))
    except (OSError, SyntaxError, ValueError):
        return True


def _standalone(path: Path) -> ModuleType:
    # A standalone file (or a package name shadowed by another one): import it under a name
    # that cannot clash with an installed module, with its directory importable for siblings.
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:8]
    name = f"gradsmith_target_{path.stem}_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def _package_of(path: Path) -> tuple[list[str], Path]:
    parts: list[str] = []
    directory = path.resolve().parent
    while (directory / "__init__.py").exists() and directory.name.isidentifier():
        parts.insert(0, directory.name)
        directory = directory.parent
    return parts, directory
