"""The working directory a Function's own code expects, when forward opens a relative path
(private).

Research code often reads data by a path relative to where its scripts run: an example
folder's Function opens ``'Materials_data/aSiH.txt'``, which exists next to its module, and
``gradsmith check`` run from the project's root gets ``FileNotFoundError`` on every input
(corpus 11a dev: torcwa's ``example/Materials.py``). The failure is the check's environment,
not the Function's. When the missing relative path exists below the Function's module's folder
or a folder between it and the project root (the working directory gradsmith was started in,
when the module is inside it), the checks run there; the Inputs column says so. Nothing is
guessed: the file the code asked for must exist at that place.

The task restores the working directory after the row (:func:`kept`). A module that reads such a
file when imported is imported there (:func:`gradsmith.discovery.file_import.import_file`), and
the working directory is restored at once: forward's own reads are looked after as above.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: ``open()``/``pathlib``: "[Errno 2] No such file or directory: 'x'"; NumPy's loadtxt and
#: genfromtxt: "x not found."
_MISSING = re.compile(r"No such file or directory: '([^']+)'|FileNotFoundError: (\S+) not found")


def missing_file(exc: BaseException) -> str | None:
    """The relative path a ``FileNotFoundError`` names (``open``'s ``filename``, or NumPy's
    "x not found." message), or None."""
    if not isinstance(exc, FileNotFoundError):
        return None
    name = exc.filename if isinstance(exc.filename, str) else None
    return name if name and not os.path.isabs(name) else missing_relative(
        f"FileNotFoundError: {exc}")


def missing_relative(reason: str) -> str | None:
    """The relative path a ``FileNotFoundError`` in ``reason`` names, or None."""
    m = _MISSING.search(reason or "")
    path = m and (m.group(1) or m.group(2))
    return path if path and not os.path.isabs(path) else None


def home_of(fn: Any, relative: str) -> Path | None:
    """The folder, from ``fn``'s module's own up to the project root, below which
    ``relative`` exists (the nearest one), or None."""
    try:
        source = inspect.getsourcefile(fn.forward if isinstance(fn, type) else fn)
    except (TypeError, AttributeError):
        return None
    return None if source is None else home_of_file(Path(source), relative)


def home_of_file(source: Path, relative: str) -> Path | None:
    """The folder, from the one holding ``source`` up to the project root (the working
    directory, when ``source`` is inside it), below which ``relative`` exists, or None."""
    folder, here = source.resolve().parent, Path.cwd().resolve()
    stops = [folder, *folder.parents] if folder.is_relative_to(here) else [folder]
    for place in stops:
        if (place / relative).exists():
            return None if place == here else place
        if place == here:
            break
    return None


def note(place: Path, relative: str) -> str:
    """The Inputs column's words for a check run in ``place``."""
    try:
        shown = os.path.relpath(place)
    except ValueError:  # another drive
        shown = str(place)
    return (f"run in working directory {shown}/: forward opens {relative!r} relative to the "
            "working directory, and it exists there, next to the Function's module")


def in_home(fn: Any, reason: str):
    """None, or (when ``reason`` is forward's ``FileNotFoundError`` for a relative path that
    exists at :func:`home_of`) a function that runs a synthesis there: it moves the working
    directory, runs it and adds :func:`note` to what it found; when that finds nothing too, it
    moves back and keeps the reason, with the note."""
    from dataclasses import replace

    relative = missing_relative(reason)
    place = home_of(fn, relative) if relative else None
    if place is None:
        return None

    def moved(again):
        before, said = os.getcwd(), note(place, relative)  # the folder named from the root
        os.chdir(place)
        found = again()
        if hasattr(found, "description"):
            return replace(found, description=f"{found.description} ({said})")
        os.chdir(before)
        return replace(found, reason=f"{found.reason} (tried after a {said.replace('run', 'move', 1)})")
    return moved


@contextlib.contextmanager
def kept() -> Iterator[None]:
    """The working directory as it was, restored after the block (a row run elsewhere)."""
    before = os.getcwd()
    try:
        yield
    finally:
        if os.getcwd() != before:
            os.chdir(before)
