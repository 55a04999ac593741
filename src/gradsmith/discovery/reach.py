"""Which names of a project lead to a Function, and how many calls away (private).

A project's tests exercise its public API, and the Function is often an internal kernel three
calls below it: a test calls ``yastn.linalg.svd``, which calls ``config.backend.svd``, which
calls ``kernel_svd.apply``. :mod:`~gradsmith.discovery.project_examples` runs the tests that
reach the Function, so it needs the names that do: the Function's own (depth 0), then every
function, method or class of the project whose body calls one of them (``name(...)`` or
``obj.name(...)``), one call further each round, read from source with ``ast`` (nothing is
imported or run here). Names are matched as names, not resolved: a test calling any ``svd`` is
a candidate, and only running it shows whether it reaches the Function; the depth ranks the
candidates so those closest to the Function run first.

A method named ``forward`` or a dunder (``__call__``, ``__init__``, ``__matmul__``) is reached
through its class (a Module is called, a class constructed, an instance multiplied by ``@``); names every object has (``run``, ``step``, ``get``) lead
everywhere and are not followed.
"""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

#: Rounds of callers followed, and names kept at most (the closer ones first).
MAX_DEPTH = 3
_MAX_NAMES = 40
_MAX_FILES = 600
_SKIPPED_DIRS = {"tests", "test", "testing", "unittests", "docs", "build", "dist", ".git",
                 "node_modules", "__pycache__", ".venv", "venv", "site-packages"}
#: Methods reached by calling their class rather than by their own name.
_THROUGH_CLASS = {"forward", "__call__", "__init__", "__new__", "__post_init__"}
#: Names too common to follow: every object has one, so each would reach the whole project.
_GENERIC = {"apply", "backward", "run", "main", "call", "step", "get", "set", "update", "setup",
            "wrapper", "inner", "wrapped", "decorator", "fn", "func", "f", "g", "_", "__enter__",
            "__exit__", "__getattr__", "__getitem__", "to", "cuda", "cpu", "item", "compute",
            "execute", "process", "helper", "default", "build", "create", "make", "init"}


def reach(function_names: set[str], root: Path) -> dict[str, int]:
    """Each name leading to the Function (``function_names``: its own and its aliases, depth
    0) mapped to the fewest calls between it and the Function, over the ``.py`` files under
    ``root`` outside test, docs and build folders.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as d:
        ...     _ = (Path(d) / "lib.py").write_text(
        ...         "def kernel(x):\\n    return Fn.apply(x)\\n"
        ...         "class Api:\\n    def solve(self, x):\\n        return kernel(x)\\n")
        ...     sorted(reach({"Fn"}, Path(d)).items())
        [('Fn', 0), ('kernel', 1), ('solve', 2)]
    """
    texts = _texts(root)
    depth = {name: 0 for name in function_names}
    trees: dict[Path, ast.Module | None] = {}
    fresh = set(function_names)
    for level in range(1, MAX_DEPTH + 1):
        if not fresh or len(depth) >= _MAX_NAMES:
            break
        pattern = _pattern(fresh)
        found: set[str] = set()
        for path, text in texts.items():
            if not pattern.search(text):
                continue
            if path not in trees:
                trees[path] = _parse(text)
            if trees[path] is not None:
                found |= callers_in(trees[path], fresh)
        fresh = {n for n in sorted(found) if n not in depth}
        for name in sorted(fresh)[:max(0, _MAX_NAMES - len(depth))]:
            depth[name] = level
    return depth


def callers_in(tree: ast.Module, names: set[str]) -> set[str]:
    """Names of ``tree``'s top-level functions, classes and methods (see the module's rules)
    whose bodies call one of ``names``, and module-level names bound to one of them."""
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and calls(node, names):
            found.add(node.name)
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                        and calls(item, names):
                    found.add(node.name if item.name in _THROUGH_CLASS or _dunder(item.name)
                              else item.name)
        elif isinstance(node, ast.Assign) and _names_in(node.value) & names:
            found |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return {n for n in found if n not in _GENERIC}


def calls(node: ast.AST, names: set[str]) -> bool:
    """Whether ``node`` calls ``name(...)``, ``x.name(...)`` or ``name.apply(...)`` for one
    of ``names``."""
    for sub in ast.walk(node):
        if not isinstance(sub, ast.Call):
            continue
        func = sub.func
        if isinstance(func, ast.Attribute) and func.attr == "apply":
            func = func.value.func if isinstance(func.value, ast.Call) else func.value
        if isinstance(func, ast.Name) and func.id in names or \
                isinstance(func, ast.Attribute) and func.attr in names:
            return True
    return False


def _dunder(name: str) -> bool:
    """An operator or protocol method (``__matmul__``, ``__getitem__``): reached by using an
    instance (``a @ b``), so through its class."""
    return name.startswith("__") and name.endswith("__")


def _names_in(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | \
        {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}


def pattern_of(names: set[str]) -> re.Pattern[str]:
    """One regular expression matching any of ``names`` as a whole word."""
    return _pattern(names)


def _pattern(names: set[str]) -> re.Pattern[str]:
    alternatives = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    return re.compile(rf"\b(?:{alternatives})\b") if names else re.compile(r"(?!)")


def _texts(root: Path) -> dict[Path, str]:
    """The project's own source files (test, docs, build and hidden folders pruned)."""
    texts: dict[Path, str] = {}
    for folder, subs, files in os.walk(root):
        subs[:] = sorted(d for d in subs if d not in _SKIPPED_DIRS and not d.startswith("."))
        for file in sorted(files):
            if not file.endswith(".py") or file.startswith("test_") or \
                    file.endswith("_test.py") or file == "conftest.py":
                continue
            path = Path(folder) / file
            try:
                texts[path] = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            if len(texts) >= _MAX_FILES:
                return texts
    return texts


def _parse(text: str) -> ast.Module | None:
    try:
        return ast.parse(text)
    except SyntaxError:
        return None
