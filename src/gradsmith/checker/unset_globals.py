"""Errors on module configuration a training script sets: the setup's, not the Function's.

Research code often keeps run settings in a module global that is None at import and filled by
the training script (``global_args = None`` in ``luq/LUQ.py``; ``LUQ.global_args = args`` in
``trainer.py``); forward or backward then reads it (``global_args["rec_grads"]``). Checked
alone, the Function meets the import-time None and raises "'NoneType' object is not
subscriptable": nothing shows the Function is wrong, and no synthesised input can fix it. Such
an error is ``unset-global`` (a warning; the verdict is INCOMPLETE and the later checks do not
run), naming the global, the module that holds it, what the code reads from it, where the
project sets it, and how to set it for the check.

Only an error about a value's kind raised on a line of the user's that reads a global of the
raising frame's module whose value is None, and that the module itself binds to None at top
level, counts; a None the Function computed stays its own error.
"""

from __future__ import annotations

import ast
import linecache
import re
import traceback
from pathlib import Path

from gradsmith.checker.report import Finding

_KIND_ERRORS = (TypeError, AttributeError)
_NONE_USE = re.compile(r"'NoneType' object (?:is not (?:subscriptable|callable|iterable)"
                       r"|has no attribute|does not support item assignment)"
                       r"|argument of type 'NoneType' is not iterable")
_MAX_FILES = 400  # files of the project read for the line that sets the global
_NOT_PROJECT = {"site-packages", "node_modules", "venv", "env", "build", "dist"}


def unset_global(exc: BaseException) -> dict | None:
    """What ``exc`` says of an unset module global: ``{"name", "module", "file", "reads",
    "set_at"}``, or None when the error is not shown to come from one (see the module's
    docstring)."""
    from gradsmith.checker.explain import _SKIP_DIRS

    if not isinstance(exc, _KIND_ERRORS) or not _NONE_USE.search(str(exc)):
        return None
    user = [(f, line) for f, line in traceback.walk_tb(exc.__traceback__)
            if not f.f_code.co_filename.startswith(_SKIP_DIRS)
            and not f.f_code.co_filename.startswith("<")]
    if not user:
        return None
    frame, lineno = user[-1]
    code = linecache.getline(frame.f_code.co_filename, lineno)
    try:
        names = {n.id for n in ast.walk(ast.parse(code.strip()))
                 if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    except SyntaxError:
        names = set(re.findall(r"\b[A-Za-z_]\w*\b", code))
    path = frame.f_globals.get("__file__") or frame.f_code.co_filename
    module, top = _importable(path, frame.f_globals.get("__name__", ""))
    for name in sorted(names):
        if name in frame.f_locals or name not in frame.f_globals \
                or frame.f_globals[name] is not None or not _bound_to_none(path, name):
            continue
        return {"name": name, "module": module, "file": path, "reads": _reads(code, name),
                "set_at": _set_at(top, module, name)}
    return None


def finding(exc: BaseException, where: str, check: str, unset: dict, message: str,
            details: dict) -> Finding:
    """The ``unset-global`` finding for ``exc``, raised by ``where`` (forward or backward)."""
    name, module = unset["name"], unset["module"]
    reads = f" (it reads {', '.join(unset['reads'])})" if unset["reads"] else ""
    where_set = (f"; the project sets it at {unset['set_at']}" if unset["set_at"]
                 else "; nothing in the project's files sets it")
    value = "{" + ", ".join(f"{k}: ..." for k in unset["reads"] if k.startswith(("'", '"'))) \
        + "}" if any(k.startswith(("'", '"')) for k in unset["reads"]) else "..."
    return Finding(
        "unset-global", "warning",
        f"{message}: `{name}` is a module global of {module} that is None at import and set "
        f"by the project's own setup, not by the Function{reads}{where_set}. No input can "
        f"fill it, so what the {where} does there is unverified and the verdict is INCOMPLETE",
        f"set it before the check runs: write a file that does `import {module}`, "
        f"`{module}.{name} = {value}` (the values your training run uses) and imports the "
        f"Function from {module}, then check it there (gradsmith check THAT_FILE::Function)",
        check, details={**details, "incomplete": True, "global": f"{module}.{name}",
                        "reads": unset["reads"], "set_at": unset["set_at"]})


def _bound_to_none(path: str, name: str) -> bool:
    """Whether the module in ``path`` binds ``name`` to None at its top level."""
    tree = _tree(path)
    return tree is not None and any(
        isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
        and node.value.value is None
        and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
        for node in tree.body)


def _reads(code: str, name: str) -> list[str]:
    """What the failing line reads from the global: keys (``'rec_grads'``), attributes."""
    keys = re.findall(rf"\b{re.escape(name)}\s*\[\s*('[^']*'|\"[^\"]*\")\s*\]", code)
    attrs = [f".{a}" for a in re.findall(rf"\b{re.escape(name)}\.(\w+)", code)]
    return list(dict.fromkeys(keys + attrs))


def _set_at(top: Path, module: str, name: str) -> str:
    """``trainer.py:128`` where a file under ``top`` (the folder the module is imported
    from) assigns ``<alias>.<name> = ...`` for an alias of ``module``; "" when none is found."""
    last = module.rsplit(".", 1)[-1]
    pattern = re.compile(rf"^\s*[\w.]*\b{re.escape(last)}\.{re.escape(name)}\s*=[^=]")
    for file in _project_files(top):
        try:
            lines = file.read_text(errors="replace").splitlines()
        except OSError:
            continue
        for i, line in enumerate(lines, 1):
            if pattern.search(line):
                return f"{file.relative_to(top)}:{i}"
    return ""


def _project_files(top: Path) -> list[Path]:
    """At most :data:`_MAX_FILES` Python files under ``top``, shallow ones first, hidden
    folders, environments and caches left out (the walk stops at the limit)."""
    import os

    found: list[Path] = []
    for folder, dirs, files in os.walk(top):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__"))
                         and d not in _NOT_PROJECT)
        found += [Path(folder) / f for f in sorted(files) if f.endswith(".py")]
        if len(found) >= _MAX_FILES:
            break
    return found[:_MAX_FILES]


def _importable(path: str, name: str) -> tuple[str, Path]:
    """The dotted name ``path`` is imported by from the highest folder on ``sys.path`` that
    gives one (``luq.LUQ`` from the project's root, where the training script imports it, not
    ``LUQ`` from its own folder), and that folder; gradsmith imports a checked file under a
    name of its own, which a user cannot import. The file's own folder and stem when no
    folder on the path holds it."""
    import sys

    file = Path(path).resolve()
    best: tuple[str, Path] | None = None
    for entry in sys.path:
        try:
            root = Path(entry or ".").resolve()
            rel = file.relative_to(root)
        except (OSError, ValueError):
            continue
        parts = rel.with_suffix("").parts
        if root.parent != root and all(p.isidentifier() for p in parts) and (
                best is None or len(parts) > len(best[0].split("."))):
            best = (".".join(parts), root)
    return best or (file.stem if name.startswith("gradsmith_") else name, file.parent)


def _tree(path: str) -> ast.Module | None:
    try:
        return ast.parse(Path(path).read_text())
    except (OSError, SyntaxError, ValueError):
        return None
