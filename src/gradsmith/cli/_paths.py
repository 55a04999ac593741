"""Checks of the files a command will write or read, made before any work (private).

A bad path found after minutes of checking or measuring is a traceback and lost work; found
first, it is one line saying what is wrong and what to do (exit code 2).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from gradsmith._errors import GradsmithUsageError
from gradsmith.discovery.targets import link_problem


def writable_file(command: str, option: str, value: str) -> None:
    """Raise :class:`GradsmithUsageError` unless ``value`` can be written as a file.

    Its folder must exist, it must not be a directory, and opening it for writing must work
    (tried without changing it: an existing file is opened for appending, a new one removed).

    Args:
        command: ``check`` or ``bench``, for the message.
        option: the option that named it, e.g. ``--html``.
        value: the path given.
    """
    path = Path(value)
    where = f"{command}: {option} {value!r}"
    if path.is_dir():
        raise GradsmithUsageError(f"{where} is a directory; name a file inside it, e.g. "
                                  f"{option} {path / ('report' + _suffix(option))}")
    loop = link_problem(path)
    if loop:
        raise GradsmithUsageError(f"{where}: {loop}")
    folder = path.absolute().parent
    if folder.exists() and not folder.is_dir():
        raise GradsmithUsageError(f"{where}: {folder} is a file, not a directory; choose a "
                                  "path in a directory")
    if not folder.is_dir():
        raise GradsmithUsageError(f"{where}: directory {folder} does not exist; create it "
                                  f"(mkdir -p {folder}) or choose another path")
    existed = path.exists()
    try:
        with open(path, "a"):
            pass
    except OSError as exc:
        raise GradsmithUsageError(f"{where} cannot be written ({exc.strerror or exc}); choose "
                                  "a path you can write to") from None
    if not existed:
        os.unlink(path)


def writable_dir(command: str, option: str, value: str) -> None:
    """Raise :class:`GradsmithUsageError` unless ``value`` is, or can be created as, a
    directory files can be written into (tried with a file created and removed at once)."""
    path = Path(value)
    where = f"{command}: {option} {value!r}"
    loop = link_problem(path)
    if loop:
        raise GradsmithUsageError(f"{where}: {loop}")
    existing = path.absolute()
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise GradsmithUsageError(f"{where}: {existing} is a file, not a directory; choose "
                                  "a directory (it is created if missing)")
    try:
        with tempfile.NamedTemporaryFile(dir=existing, prefix=".gradsmith-probe-"):
            pass
    except OSError as exc:
        raise GradsmithUsageError(f"{where}: cannot create files in {existing} "
                                  f"({exc.strerror or exc}); choose a path you can write "
                                  "to") from None


def _suffix(option: str) -> str:
    return {"--html": ".html", "--json": ".json", "--markdown": ".md", "--plot": ".png"}.get(
        option, "")
