"""What can be known about a target without running any of its code.

``gradsmith check`` reports a misspelt module or ``::Name`` at once, before a worker starts,
and never imports user code in its own process (a package ``__init__`` that hangs or calls
``os._exit`` must meet the worker's time limit instead). Two questions are answered here from
the file system and the syntax tree alone, conservatively: when the answer could depend on
running code (a package that edits its ``__path__``, a module with ``import *`` or a module
``__getattr__``), the answer is "unknown" and the worker decides.
"""

from __future__ import annotations

import ast
import functools
import importlib.machinery
import importlib.util
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ModuleLookup:
    """Where a dotted module is, found without importing anything.

    Attributes:
        origin: the module's file (``__init__.py`` for a package), or ``None`` when it has
            none (namespace package, built-in) or was not found.
        found: ``True`` found, ``False`` certainly absent, ``None`` only importing can tell.
        missing: the first dotted prefix that does not exist (when ``found`` is False).
    """

    origin: str | None
    found: bool | None
    missing: str = ""


def locate_module(dotted: str, base: Path) -> ModuleLookup:
    """Find the file of module ``dotted`` as ``python -m`` run from ``base`` would import it.

    Only finders run (they read directories and the import system's metadata); no package's
    ``__init__`` is executed, unlike :func:`importlib.util.find_spec` on a submodule.

    Example:
        >>> from pathlib import Path
        >>> locate_module("gradsmith.discovery.static", Path(".")).found
        True
    """
    parts = dotted.split(".")
    try:
        spec = importlib.machinery.PathFinder.find_spec(parts[0], [str(base)])
        if spec is None:
            spec = importlib.util.find_spec(parts[0])
    except (ImportError, ValueError):  # a broken finder, or sys.modules without a spec
        return ModuleLookup(None, None)
    if spec is None:
        return ModuleLookup(None, False, parts[0])
    for i in range(1, len(parts)):
        locations = spec.submodule_search_locations
        if locations is None:  # a plain module has no submodules
            return ModuleLookup(None, False, ".".join(parts[:i + 1]))
        parent = spec
        try:
            spec = importlib.machinery.PathFinder.find_spec(".".join(parts[:i + 1]),
                                                            list(locations))
        except (ImportError, ValueError):
            return ModuleLookup(None, None)
        if spec is None:
            certain = parent.origin is not None and not _edits_path(parent.origin)
            return ModuleLookup(None, False if certain else None, ".".join(parts[:i + 1]))
    origin = spec.origin if spec.has_location else None
    return ModuleLookup(origin, True)


def _edits_path(init_file: str) -> bool:
    """True when a package's ``__init__`` may add directories to its ``__path__``."""
    try:
        text = Path(init_file).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return True
    return "__path__" in text or "extend_path" in text


@dataclass(frozen=True)
class ModuleNames:
    """Names a module's top level defines, from its syntax tree.

    Attributes:
        names: every name bound at the top level (an over-approximation is fine).
        complete: False when the module can bind names the tree does not show (``import *``,
            a module ``__getattr__``, ``globals()``/``exec``/``sys.modules`` tricks).
        candidates: classes whose bases mention ``Function``, and functions or classes with
            a decorator mentioning ``example``: what ``gradsmith check`` would list.
    """

    names: frozenset[str]
    complete: bool
    candidates: tuple[str, ...]


_DYNAMIC_CALLS = {"globals", "vars", "exec", "setattr", "__import__"}


def module_names(tree: ast.Module) -> ModuleNames:
    """The top-level names of a parsed module; see :class:`ModuleNames`.

    Example:
        >>> import ast
        >>> info = module_names(ast.parse("from torch.autograd import Function\\n"
        ...                               "class Swish(Function): pass"))
        >>> sorted(info.names), info.complete, info.candidates
        (['Function', 'Swish'], True, ('Swish',))
    """
    names: set[str] = set()
    candidates: list[str] = []
    complete = True
    for node in _top_level(tree.body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            complete &= node.name != "__getattr__"
            if _is_candidate(node):
                candidates.append(node.name)
        elif isinstance(node, ast.Import):
            names.update(a.asname or a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            complete &= all(a.name != "*" for a in node.names)
            names.update(a.asname or a.name for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, ast.MatchAs | ast.MatchStar) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and node.attr == "__dict__":
            complete = False
    for node in ast.walk(tree):  # anywhere: a function run at import time may bind globals
        if isinstance(node, ast.Global):
            names.update(node.names)
        elif isinstance(node, ast.NamedExpr) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            complete &= node.func.id not in _DYNAMIC_CALLS
        elif isinstance(node, ast.Attribute) and node.attr == "modules":
            complete &= not (isinstance(node.value, ast.Name) and node.value.id == "sys")
    return ModuleNames(frozenset(names), complete, tuple(candidates))


def file_candidates(path: str) -> tuple[str, ...]:
    """What ``gradsmith check`` would list in the file at ``path``, read from its syntax tree
    alone (see :attr:`ModuleNames.candidates`): how the rows of a file that fails to import
    are named. Empty when the file cannot be read or parsed; pass regular files only (a FIFO
    would block the read).

    Example:
        >>> file_candidates(__file__)
        ()
    """
    try:
        tree = ast.parse(Path(path).read_bytes(), filename=path)
    except (SyntaxError, ValueError, OSError, RecursionError, MemoryError):
        return ()
    return tuple(dict.fromkeys(module_names(tree).candidates))  # if/else: one row per name


def _top_level(body: list[ast.stmt]):
    """Nodes executed at module level: statements and what they bind, not function bodies."""
    stack = list(reversed(body))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


def _is_candidate(node: ast.stmt) -> bool:
    decorated = any("example" in ast.unparse(d) for d in node.decorator_list)
    if isinstance(node, ast.ClassDef):
        return decorated or any("Function" in ast.unparse(b) for b in node.bases)
    return decorated


def class_lines(path: str) -> dict[str, int]:
    """Line of every ``class`` statement in the file at ``path``, by qualified name
    (``Outer.Inner``; a class inside a function is left out: its name is not unique).

    The file is parsed once and remembered while it is unchanged (:func:`inspect.getsourcelines`
    parses the whole file again for every class, which made listing a module of n Functions
    take time in n squared: 26 s for 200, over 600 s for 1,000).

    Example:
        >>> class_lines(__file__)["ModuleLookup"] > 0
        True
    """
    try:
        stat = Path(path).stat()
    except OSError:
        return {}
    return _class_lines(path, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=64)
def _class_lines(path: str, _mtime: int, _size: int) -> dict[str, int]:
    try:
        tree = ast.parse(Path(path).read_bytes(), filename=path)
    except (SyntaxError, ValueError, OSError, RecursionError, MemoryError):
        return {}
    found: dict[str, int] = {}
    twice: set[str] = set()  # defined in two places (if/else): only inspect can tell which
    stack: list[tuple[str, list[ast.stmt]]] = [("", tree.body)]
    while stack:
        prefix, body = stack.pop()
        for node in body:
            if isinstance(node, ast.ClassDef):
                name = prefix + node.name
                if name in found:
                    twice.add(name)
                found[name] = node.lineno
                stack.append((name + ".", node.body))
            elif isinstance(node, (ast.If, ast.Try)):  # classes defined conditionally
                stack.append((prefix, [*node.body, *node.orelse,
                                       *getattr(node, "finalbody", []),
                                       *[s for h in getattr(node, "handlers", []) for s in h.body]]))
    return {name: line for name, line in found.items() if name not in twice}
