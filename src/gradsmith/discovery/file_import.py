"""Import a module from its file path, as ``python FILE`` or its package would (private).

A file inside a package is imported as the package's member (its relative imports work). When
that fails in the package's ``__init__`` or a sibling, not in the file, and the file imports
nothing relative to its package, it is imported alone, as ``python FILE`` runs it (issue 18,
corpus 8b: a two-class quantizer file in a package whose ``__init__`` needs a detection library
that is not installed). A standalone file gets a name that cannot clash with an installed module.

A file in a folder without ``__init__.py`` (a namespace package) that imports relative to its
package is imported as that package's member, rooted at the nearest folder that gives its
relative imports (and those of the siblings it imports) enough parents (corpus 9b dev:
PSA-Compress's ``models/psa_modules/lerp_psa.py`` does ``from .psa import psa_func``).

The package is imported from the file's own root, ahead of another copy of it earlier on
``sys.path`` (an installed release of a src-layout project whose ``src/`` is on the path too).
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.machinery
import importlib.util
import os
import sys
import traceback
from pathlib import Path
from types import ModuleType

from gradsmith.discovery.working_dir import home_of_file, kept, missing_file


def import_file(path: Path) -> ModuleType:
    """The module at ``path``; what it raises on import propagates. A module that opens a
    file by a path relative to the working directory, which exists next to it (an example
    folder's data), is imported from that folder (:mod:`gradsmith.discovery.working_dir`)."""
    try:
        return _import_file(path)
    except FileNotFoundError as exc:
        relative = missing_file(exc)
        place = home_of_file(path, relative) if relative else None
        if place is None:
            raise
        with kept():
            os.chdir(place)
            return _import_file(path)


def _import_file(path: Path) -> ModuleType:
    level = _relative_level(path)
    package_parts, root = _package_of(path, level)
    if package_parts:
        try:
            module = _import_member(path, package_parts, root)
        except Exception as exc:
            namespace = len(package_parts) > len(_package_of(path)[0])
            if (_reached(exc, path) or level != 0) and not namespace:
                raise
            # The package's __init__ (or a sibling it imports) failed, not the file: a file
            # that imports nothing relative is importable alone, as `python FILE` runs it. A
            # namespace member was always tried alone before: it still is (`try: from .x`).
            try:
                return _standalone(path)
            except Exception:
                raise exc from None
        if Path(getattr(module, "__file__", "") or "").resolve() == path.resolve():
            return module
    elif (dotted := _shadowed_dotted(path)) is not None:
        return _import_member(path, *dotted)  # the project's own `from pkg.sibling import`
    return _standalone(path)


def _shadowed_dotted(path: Path) -> tuple[list[str], Path] | None:
    """``(package_parts, root)`` that import ``path`` the way its project does, when importing it
    alone would shadow its own package: the file does ``from pkg.sibling import ...`` where
    ``pkg`` is the name of a folder it sits in (without ``__init__.py``), and that folder also
    holds a module ``pkg`` (``pkg/pkg.py``), which the file's folder first on ``sys.path`` makes
    ``pkg`` (corpus 11b dev: BIMRL's ``brim_core/sparse_grad_attn.py`` next to
    ``brim_core/brim_core.py``: "'brim_core' is not a package"). None otherwise."""
    try:
        tree = ast.parse(path.read_text(errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return None
    tops = {n.module.split(".")[0] for n in ast.walk(tree)
            if isinstance(n, ast.ImportFrom) and n.level == 0 and n.module and "." in n.module}
    tops |= {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
             for a in n.names if "." in a.name}
    here = path.resolve().parent
    folders = [here, *here.parents]
    for i, folder in enumerate(folders[:-1]):
        if folder.name in tops and folder.name.isidentifier() and _shadows(here, folder.name):
            parts = [f.name for f in reversed(folders[:i + 1])]
            if all(p.isidentifier() for p in parts):
                return parts, folder.parent
    return None


def _reached(exc: BaseException, path: Path) -> bool:
    """Whether ``exc``'s traceback ran ``path``'s own code."""
    here = path.resolve()
    return any(Path(f.filename).resolve() == here
               for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith("<"))


def _import_member(path: Path, package_parts: list[str], root: Path) -> ModuleType:
    """``path`` imported as its package's member; a root too shallow for the relative imports
    of a sibling it imports (``from ..utils import``) moves up a namespace folder and retries."""
    while True:
        name = ".".join(package_parts + ([] if path.stem == "__init__" else [path.stem]))
        _root_first(root, package_parts[0])
        importlib.invalidate_caches()  # folders made after start-up (namespace packages)
        _claim_namespaces(package_parts, root)
        try:
            return importlib.import_module(name)
        except ImportError as exc:
            deeper = _package_of(path, len(package_parts) + 1)
            if "beyond top-level package" not in str(exc) or deeper[1] == root:
                raise
            package_parts, root = deeper


def _root_first(root: Path, top: str) -> None:
    """Make ``root`` the place ``top`` is imported from: put it on ``sys.path``, and ahead of an
    entry that holds another copy of ``top`` (an installed release of a src-layout project whose
    ``src/`` is on the path too: corpus 9a, tad-mctc's ``storch/linalg.py`` resolved to the
    installed ``tad_mctc`` and was then imported alone, failing on its relative imports)."""
    entry = str(root)
    if entry not in sys.path:
        sys.path.insert(0, entry)
        return
    if top in sys.modules:
        return  # already imported: the caller's file check decides
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        spec = None
    places = [spec.origin] if spec and spec.origin else []
    places += list(spec.submodule_search_locations or []) if spec else []
    if not any(Path(p).resolve().is_relative_to(root.resolve()) for p in places if p):
        sys.path.remove(entry)
        sys.path.insert(0, entry)


def _claim_namespaces(package_parts: list[str], root: Path) -> None:
    """Register the leading folders without ``__init__.py`` as namespace packages rooted at
    ``root``: Python's finder prefers a module of the same name anywhere later on ``sys.path``
    (an installed ``models`` or ``ops``) to a namespace folder. A name already imported stays."""
    folder = root
    for i, part in enumerate(package_parts):
        folder = folder / part
        if (folder / "__init__.py").exists():
            return
        name = ".".join(package_parts[:i + 1])
        if name in sys.modules:
            if str(folder) not in _locations(sys.modules[name]):
                return  # another module owns the name: the caller's file check decides
            continue
        spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
        spec.submodule_search_locations = [str(folder)]
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        if i:
            setattr(sys.modules[".".join(package_parts[:i])], part, module)


def _locations(module: ModuleType) -> list[str]:
    try:
        return [str(p) for p in getattr(module, "__path__", None) or []]
    except Exception:  # a namespace path whose parent is gone cannot be recomputed
        return []


def _relative_level(path: Path) -> int | None:
    """The most parents a relative import of ``path`` climbs (0: none; None: unreadable)."""
    try:
        tree = ast.parse(path.read_text(errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return None
    return max((n.level for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)), default=0)


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


def _shadows(here: Path, name: str) -> bool:
    """Whether ``here`` first on ``sys.path`` makes ``name`` a plain module (``name.py``), not
    the package of that name: a regular package ``here/name/`` (with ``__init__.py``) would win
    over the module, and is what the project means (a checkout named like its package)."""
    return (here / f"{name}.py").is_file() and not (here / name / "__init__.py").exists()


def _package_of(path: Path, level: int | None = 0) -> tuple[list[str], Path]:
    """``path``'s package names and the folder above them: the folders with ``__init__.py``,
    then, while fewer than ``level`` (relative imports need that many), namespace folders."""
    parts: list[str] = []
    directory = path.resolve().parent
    while directory.name.isidentifier() and (
            (directory / "__init__.py").exists() or len(parts) < (level or 0)):
        parts.insert(0, directory.name)
        directory = directory.parent
    return parts, directory
