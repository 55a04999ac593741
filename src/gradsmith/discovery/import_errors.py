"""Say why a module's import failed when the user can act on it (issue 18, corpora 8b).

- inside Python's standard library (an ``enum.Flag`` subclass with non-integer members raises in
  Python 3.11's ``enum.py``): the row names the project's line that reached it and says the
  module cannot be imported on this Python, so it is not read as a gradsmith failure;
- a name the module never imports (``class R(Function):`` in a file with no imports): the
  import fails for everyone; the row says which import to add;
- a module that is not installed: the row names it and the Python to install it for;
- a module that reads its command line or standard input at import (a configuration path
  from ``sys.argv``): the row names the line; gradsmith imports as ``python FILE`` would, with
  no arguments (see :func:`~gradsmith.discovery.collect.load_module`).
"""

from __future__ import annotations

import linecache
import os
import platform
import re
import sys
import sysconfig
import traceback
from pathlib import Path


def _in_stdlib(f: traceback.FrameSummary) -> bool:
    stdlib = os.path.realpath(sysconfig.get_paths()["stdlib"])
    path = os.path.realpath(f.filename)
    return path.startswith(stdlib + os.sep) and "site-packages" not in path


def stdlib_note(frames: list[traceback.FrameSummary]) -> str:
    """`` (...)`` naming Python's version, the standard-library file and the project's line,
    when the innermost frame is the standard library's; ``""`` otherwise."""
    if not frames or not _in_stdlib(frames[-1]):
        return ""
    project = [f for f in frames if not _in_stdlib(f) and not f.filename.startswith("<")
               and "/gradsmith/" not in f.filename]
    if not project:
        return ""
    line = project[-1]
    code = f" `{line.line.strip()}`" if line.line else ""
    return (f" (raised inside Python {platform.python_version()}'s own "
            f"{Path(frames[-1].filename).name} by the project's code at {line.filename}:"
            f"{line.lineno}{code}: the project's module cannot be imported on this Python; "
            "this is not a gradsmith failure)")


# Names a module uses without importing them, and the import that binds each as torch code means.
_KNOWN_IMPORTS = {
    "torch": "import torch", "nn": "from torch import nn", "F": "import torch.nn.functional as F",
    "Function": "from torch.autograd import Function", "np": "import numpy as np",
    "math": "import math", "Variable": "from torch.autograd import Variable",
    "once_differentiable": "from torch.autograd.function import once_differentiable",
}
# What a module reads when it is run as a program: its command line and its standard input.
_SCRIPT_INPUT = re.compile(r"\bsys\.argv\b|\bsys\.stdin\b|\.parse_args\(|\binput\(")


def import_note(exc: BaseException, frames: list[traceback.FrameSummary]) -> str:
    """Why the import failed, when it is a kind users can act on: a name the module never
    imports (``NameError``), a module that is not installed (``ModuleNotFoundError``), or a
    module that reads its command line or standard input at import; else :func:`stdlib_note`.

    Example:
        >>> try:
        ...     exec(compile("class Rev(Function): pass", "rev.py", "exec"), {})
        ... except NameError as exc:
        ...     import traceback
        ...     print(import_note(exc, traceback.extract_tb(exc.__traceback__))[:74])
         (rev.py:1 uses `Function` but the module never imports or defines it: its
    """
    project = [f for f in frames if not f.filename.startswith("<") and "/gradsmith/"
               not in f.filename and "importlib" not in f.filename and not _in_stdlib(f)]
    if isinstance(exc, NameError) and exc.name and (where := project or frames[-1:]):
        line = where[-1]
        fix = _KNOWN_IMPORTS.get(exc.name, f"import or define {exc.name}")
        return (f" ({Path(line.filename).name}:{line.lineno} uses `{exc.name}` but the module "
                "never imports or defines it: its import fails for every user, not only under "
                f"gradsmith. Fix: add `{fix}` at the top of {Path(line.filename).name})")
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        top = exc.name.split(".")[0]
        if (own := _own_folder(top, project)) is not None:
            return (f" (`{top}` is the project's own, in {own}, which is not on sys.path. "
                    f"Fix: run from {own} or add it to PYTHONPATH)")
        return (f" (the module `{top}` is not installed for the Python gradsmith runs with, "
                f"{sys.executable}. Fix: install the package that provides `{top}` there "
                "(e.g. `python -m pip install ...`) or put the folder that holds it on "
                "PYTHONPATH)")
    for f in reversed(project):
        found = _reads_script_input(f.filename)
        if found is not None:
            lineno, text = found
            return (f" (the project's {Path(f.filename).name}:{lineno} `{text}` reads the "
                    "command line or standard input at import; gradsmith imports the module "
                    "as `python FILE` would, with no arguments and an empty standard input, "
                    "and it failed there: it cannot be imported outside the program it belongs "
                    "to. Fix: move that read under `if __name__ == \"__main__\":` or into a "
                    "function the program calls, or check the Function from a module that "
                    "does not read it at import)")
    return stdlib_note(frames)


def _reads_script_input(filename: str) -> tuple[int, str] | None:
    """The first line of ``filename`` that reads the command line or standard input."""
    for lineno, line in enumerate(linecache.getlines(filename), 1):
        if _SCRIPT_INPUT.search(line.split("#", 1)[0]):
            return lineno, line.strip()
    return None


def _own_folder(top: str, frames: list[traceback.FrameSummary]) -> Path | None:
    """The folder above one of the project's frames (a few levels up) that holds the package
    or module ``top``, if any."""
    for f in frames:
        for folder in list(Path(f.filename).resolve().parents)[:4]:
            if (folder / top / "__init__.py").exists() or (folder / f"{top}.py").exists():
                return folder
    return None
