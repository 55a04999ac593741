"""Which files need importing to list their candidates, read from their text alone.

Importing a file costs a worker task (0.1-0.2 s each: 6 minutes for a directory of 2,000), and
most files of a project hold no Function. A file needs no import when nothing in it can become
a candidate (:func:`gradsmith.discovery.list_candidates`): a ``torch.autograd.Function``
subclass, or a callable with a registered example. Such an object needs one of the words
``Function`` (every Function base class of torch has it in its name), ``custom_op`` or
``library`` (torch's operator registration), or ``example`` / ``gradsmith`` (registering
inputs), unless it comes from another module of the user's. So a file is skipped only when it
parses, mentions none of those words, runs no dynamic import or ``exec``, and imports nothing
but the standard library, torch and NumPy. Anything else is imported, as before.
"""

from __future__ import annotations

import ast
import re
import sys
import tokenize
from pathlib import Path

from gradsmith.discovery.targets import Source

# Words without which no candidate can be made; matched anywhere (comments and strings too:
# a false "needs import" only costs time).
_MARKERS = re.compile(r"Function|custom_op|library|example|gradsmith|__getattr__|__import__|"
                      r"import_module|\bexec\b|\beval\b|globals|__dict__|sys\.modules")
# Modules that hold none of the user's Functions or registered examples.
_SAFE_ROOTS = frozenset(sys.stdlib_module_names) | {"torch", "numpy", "typing_extensions"}


def needs_import(source: Source) -> bool:
    """False when ``source`` is a file found by walking a directory whose candidates are
    certainly none, so listing it needs no import; True otherwise (a file named by the user,
    whose import error the user wants to see; modules, packages, files it cannot read or
    parse: the worker reports those).

    Example:
        >>> import tempfile, pathlib
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     path = pathlib.Path(folder, "helpers.py")
        ...     _ = path.write_text("import math\\ndef area(r):\\n    return math.pi * r * r\\n")
        ...     needs_import(Source("file", str(path), "helpers.py", walked=True))
        False
    """
    if not source.walked or source.kind != "file" or source.problem or source.names:
        return True
    path = Path(source.location)
    if path.name == "__init__.py":  # a package lists its submodules
        return True
    try:
        with tokenize.open(path) as handle:
            text = handle.read()
        tree = ast.parse(text, filename=str(path))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError, RecursionError, MemoryError):
        return True
    if _MARKERS.search(text):
        return True
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level or not _safe(node.module or "", path.parent):
                return True
        elif isinstance(node, ast.Import):
            if not all(_safe(alias.name, path.parent) for alias in node.names):
                return True
    return False


def _safe(module: str, folder: Path) -> bool:
    """True for a module of the standard library, torch or NumPy, unless a file or folder of
    that name beside the importing file shadows it (its folder comes first on ``sys.path``)."""
    root = module.split(".")[0]
    return root in _SAFE_ROOTS and not ((folder / f"{root}.py").exists()
                                        or (folder / root).is_dir())
