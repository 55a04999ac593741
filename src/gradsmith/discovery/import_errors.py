"""Say when a module's import failed inside Python's standard library (issue 18, corpus 8b dev:
a project's ``enum.Flag`` subclass with non-integer members raises in Python 3.11's
``enum.py``): the row names the project's line that reached it and says the module cannot be
imported on this Python, so it is not read as a gradsmith failure.
"""

from __future__ import annotations

import os
import platform
import sysconfig
import traceback
from pathlib import Path


def stdlib_note(frames: list[traceback.FrameSummary]) -> str:
    """`` (...)`` naming Python's version, the standard-library file and the project's line,
    when the innermost frame is the standard library's; ``""`` otherwise."""
    stdlib = os.path.realpath(sysconfig.get_paths()["stdlib"])

    def in_stdlib(f: traceback.FrameSummary) -> bool:
        path = os.path.realpath(f.filename)
        return path.startswith(stdlib + os.sep) and "site-packages" not in path

    if not frames or not in_stdlib(frames[-1]):
        return ""
    project = [f for f in frames if not in_stdlib(f) and not f.filename.startswith("<")
               and "/gradsmith/" not in f.filename]
    if not project:
        return ""
    line = project[-1]
    code = f" `{line.line.strip()}`" if line.line else ""
    return (f" (raised inside Python {platform.python_version()}'s own "
            f"{Path(frames[-1].filename).name} by the project's code at {line.filename}:"
            f"{line.lineno}{code}: the project's module cannot be imported on this Python; "
            "this is not a gradsmith failure)")
