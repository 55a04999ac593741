"""Module globals a training script sets, filled from the project's own defaults (private).

Research code keeps run settings in a module global that is None at import and filled by the
training script (``global_args = None`` in ``quant.py``; ``quant.global_args = args`` in
``trainer.py``, ``args`` from ``main.py``'s argparse); forward or backward reads it
(``global_args["quantile"]``). Checked alone the Function meets the None: a skip, or an
``unset-global``. When the project's own argparse states a default for every key the Function
reads (``parser.add_argument('--quantile', type=float, default=0.975)``; a ``store_true`` flag
is False), :func:`fill_settings` sets the global to those defaults, as a run without options
would, and says so in the Inputs column; otherwise the global stays None and the finding or
skip names it (:func:`unset_reads`, :func:`setting_advice`). Read from the source; the only
thing run is the assignment of the defaults to the global.
"""

from __future__ import annotations

import ast
import inspect
import os
import sys
import types
from pathlib import Path
from typing import Any

from gradsmith.discovery.source import parse

__all__ = ["bound_to_none", "fill_settings", "importable", "set_at", "setting_advice",
           "unset_reason", "unset_reads"]

_MAX_FILES = 400  # files of the project read for the line that sets the global, or defaults
_NOT_PROJECT = {"site-packages", "node_modules", "venv", "env", "build", "dist"}


def unset_reads(fn: Any) -> dict[str, tuple[dict, set[str], bool]]:
    """Module globals forward, backward or setup_context read (``G["key"]``, ``G.attr``) that
    are None now and that their module binds to None at top level: name -> (the module's
    globals, the keys or attributes read, whether read by key)."""
    owner = fn if isinstance(fn, type) else None
    methods = [vars(owner).get(m) for m in ("forward", "backward", "setup_context")] \
        if owner is not None else [fn]
    found: dict[str, tuple[dict, set[str], bool]] = {}
    for method in filter(None, methods):
        method = inspect.unwrap(getattr(method, "__func__", method))
        scope = getattr(method, "__globals__", None)
        tree = parse(method)
        if scope is None or tree is None:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and \
                    isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
                name, read, keyed = node.value.id, node.slice.value, True
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                name, read, keyed = node.value.id, node.attr, False
            else:
                continue
            if name in scope and scope[name] is None and name not in _locals(tree) \
                    and bound_to_none(scope.get("__file__", ""), name):
                entry = found.setdefault(name, (scope, set(), keyed))
                entry[1].add(read)
    return found


def fill_settings(fn: Any) -> str:
    """Set each unset global ``fn`` reads (:func:`unset_reads`) to its project's argparse
    defaults when they state every key read; the note for the Inputs column ("" when none)."""
    notes = []
    for name, (scope, reads, keyed) in unset_reads(fn).items():
        path = scope.get("__file__") or ""
        _, top = importable(path, scope.get("__name__", ""))
        defaults, where = argparse_defaults(top, reads)
        if not defaults:
            continue
        scope[name] = dict(defaults) if keyed else types.SimpleNamespace(**defaults)
        shown = ", ".join(f"{k}={defaults[k]!r}" for k in sorted(reads))
        notes.append(f"{name} = {where}'s argparse defaults, {shown} read here: None at "
                     "import, set by the project's setup")
    return "; ".join(notes)


def unset_reason(fn: Any, why: str) -> str | None:
    """Why no inputs were found, when forward failed on a global :func:`unset_reads` names
    ("'NoneType' object is not subscriptable") and no defaults filled it: the global, what
    is read, where the project sets it and how to set it; None otherwise."""
    if "'NoneType'" not in why:
        return None
    for name, (scope, reads, keyed) in unset_reads(fn).items():
        module, top = importable(scope.get("__file__") or "", scope.get("__name__", ""))
        where = set_at(top, module, name)
        shown = ", ".join(repr(r) if keyed else f".{r}" for r in sorted(reads))
        return (f"the Function reads the module global `{module}.{name}` ({shown}), which is "
                "None at import and set by the project's setup"
                + (f" ({where})" if where else "") + ", and no argparse default in the project "
                f"gives every value read ({why}). Fix: "
                + setting_advice(module, name, reads, keyed))
    return None


def setting_advice(module: str, name: str, reads: list[str] | set[str], keyed: bool) -> str:
    """How to set the global for a check: a file that sets it and imports the Function."""
    shown = sorted(reads)
    value = ("{" + ", ".join(f"{k!r}: ..." for k in shown) + "}") if keyed and shown else "..."
    return (f"write a file that does `import {module}`, `{module}.{name} = {value}` (the "
            f"values your training run uses) and imports the Function from {module}, then "
            "check it there (gradsmith check THAT_FILE::Function)")


def argparse_defaults(top: Path, reads: set[str]) -> tuple[dict[str, Any], str]:
    """``dest -> default`` of every ``add_argument('--name', ..., default=LITERAL)`` (a
    ``store_true`` flag False, ``store_false`` True) in the first file under ``top`` whose
    options include every name in ``reads``, and that file's name; ({}, "") when none."""
    for file in project_files(top):
        try:
            text = file.read_text(errors="replace")
        except OSError:
            continue
        if "add_argument" not in text:
            continue
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            continue
        found = dict(_argument(node) for node in ast.walk(tree) if _is_add_argument(node))
        found.pop(None, None)
        if found and reads <= set(found):
            return found, str(file.relative_to(top))
    return {}, ""


def bound_to_none(path: str, name: str) -> bool:
    """Whether the module in ``path`` binds ``name`` to None at its top level."""
    try:
        tree = ast.parse(Path(path).read_text())
    except (OSError, SyntaxError, ValueError):
        return False
    return any(isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
               and node.value.value is None
               and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
               for node in tree.body)


def importable(path: str, name: str) -> tuple[str, Path]:
    """The dotted name ``path`` is imported by from the highest folder on ``sys.path`` that
    gives one (``luq.LUQ`` from the project's root, where the training script imports it, not
    ``LUQ`` from its own folder), and that folder; gradsmith imports a checked file under a
    name of its own, which a user cannot import. The file's own folder and stem when no
    folder on the path holds it."""
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


def set_at(top: Path, module: str, name: str) -> str:
    """``trainer.py:128`` where a file under ``top`` (the folder the module is imported
    from) assigns ``<alias>.<name> = ...`` for an alias of ``module``; "" when none is found."""
    import re

    last = module.rsplit(".", 1)[-1]
    pattern = re.compile(rf"^\s*[\w.]*\b{re.escape(last)}\.{re.escape(name)}\s*=[^=]")
    for file in project_files(top):
        try:
            lines = file.read_text(errors="replace").splitlines()
        except OSError:
            continue
        for i, line in enumerate(lines, 1):
            if pattern.search(line):
                return f"{file.relative_to(top)}:{i}"
    return ""


def project_files(top: Path) -> list[Path]:
    """At most :data:`_MAX_FILES` Python files under ``top``, shallow ones first, hidden
    folders, environments and caches left out (the walk stops at the limit)."""
    found: list[Path] = []
    for folder, dirs, files in os.walk(top):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__"))
                         and d not in _NOT_PROJECT)
        found += [Path(folder) / f for f in sorted(files) if f.endswith(".py")]
        if len(found) >= _MAX_FILES:
            break
    return found[:_MAX_FILES]


def _locals(tree: ast.AST) -> set[str]:
    """Names a function binds itself (parameters, assignments): not the module's."""
    bound = {a.arg for n in ast.walk(tree) if isinstance(n, ast.arguments)
             for a in [*n.posonlyargs, *n.args, *n.kwonlyargs]}
    globals_ = {g for n in ast.walk(tree) if isinstance(n, ast.Global) for g in n.names}
    bound |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)
              and isinstance(n.ctx, ast.Store)}
    return bound - globals_


def _is_add_argument(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
        node.func.attr == "add_argument" and bool(node.args)


def _argument(call: ast.Call) -> tuple[str | None, Any]:
    """``(dest, default)`` of one ``add_argument`` call; dest None when it has no literal
    default (or no option name)."""
    flags = [a.value for a in call.args if isinstance(a, ast.Constant)
             and isinstance(a.value, str)]
    words = {k.arg: k.value for k in call.keywords}
    dest = words.get("dest")
    name = dest.value if isinstance(dest, ast.Constant) else next(
        (f.lstrip("-").replace("-", "_") for f in flags if f.startswith("--")),
        flags[0].lstrip("-").replace("-", "_") if flags else None)
    action = words.get("action")
    action = action.value if isinstance(action, ast.Constant) else None
    if "default" in words:
        try:
            return name, ast.literal_eval(words["default"])
        except ValueError:
            return None, None
    if action in ("store_true", "store_false"):
        return name, action == "store_false"
    return name, None  # argparse's own default
