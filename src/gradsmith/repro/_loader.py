"""How a repro script imports the user's Function: the body of its ``load()`` (text).

A file is looked for relative to the script's own folder first, then at the absolute path it
had when the script was written, so scripts and code moved or checked out together still run.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path


def loader(source: dict, here: Path | None = None) -> str:
    """The body of the script's ``load()``. A file is looked for relative to the script's own
    folder first (the script and the code moved or checked out elsewhere together), then at
    the absolute path it had when the script was written."""
    attr = source["attr"]
    if source["kind"] == "module":
        lines = [f"module = importlib.import_module({source['location']!r})"]
    else:
        path = Path(source["location"])
        package, root = _package_of(path)
        if package:
            inside = str(path.resolve().relative_to(root))
            lines = [f"root = _found({_candidates(root, here)!r}, {inside!r})",
                     "sys.path.insert(0, root)",
                     f"module = importlib.import_module({package!r})"]
        else:
            lines = [f"folder = _found({_candidates(path.resolve().parent, here)!r}, "
                     f"{path.name!r})",
                     f"path = os.path.join(folder, {path.name!r})",
                     "sys.path.insert(0, folder)",
                     "spec = importlib.util.spec_from_file_location('user_module', path)",
                     "module = importlib.util.module_from_spec(spec)",
                     "sys.modules['user_module'] = module",
                     "spec.loader.exec_module(module)"]
    lines += ["obj = module", f"for part in {attr.split('.')!r}:",
              "    obj = getattr(obj, part)", "return obj"]
    return textwrap.indent("\n".join(lines), "    ")


def _candidates(folder: Path, here: Path | None) -> list[str]:
    """``folder`` relative to the script's folder (when it has one), then absolute."""
    found = []
    if here is not None:
        try:
            found.append(os.path.relpath(folder, here.resolve()))
        except ValueError:  # another drive (Windows): no relative path
            pass
    return [*found, str(folder)]


def _package_of(path: Path) -> tuple[str, Path]:
    """Dotted module name and sys.path root of a file inside packages ('' when standalone)."""
    parts: list[str] = []
    directory = path.resolve().parent
    while (directory / "__init__.py").exists() and directory.name.isidentifier():
        parts.insert(0, directory.name)
        directory = directory.parent
    if not parts:
        return "", directory
    if path.stem != "__init__":
        parts.append(path.stem)
    return ".".join(parts), directory
