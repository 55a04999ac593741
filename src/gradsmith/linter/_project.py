"""What a project's files on disk say about its modules: the extension modules its
``setup.py`` builds (read, never run), compiled files, and Python sources.

Everything read is kept until :func:`forget` (called when an analysis ends), once per folder.
"""

from __future__ import annotations

import ast
import os

from gradsmith.linter._symbols import ModuleSymbols, statements

#: Folders above a file searched for ``setup.py``.
_MAX_UP = 8
_SETUPS: dict[str, tuple[frozenset[str], tuple[str, ...]]] = {}
_BUILT_AT: dict[str, frozenset[str]] = {}  # folder -> where the setup.py files above build
_LISTINGS: dict[str, frozenset[str]] = {}  # folder -> names of its compiled modules


def forget() -> None:
    """Drop what was read from disk during the last run (called when an analysis ends)."""
    _SETUPS.clear()
    _BUILT_AT.clear()
    _LISTINGS.clear()
    _LINTED_SETUPS.clear()


def note_setups(paths) -> None:
    """Remember the extensions every linted ``setup.py`` declares (gpt-neox builds
    ``fused_rotary_positional_embedding`` in megatron/fused_kernels/setup.py, beside the
    package that imports it by that top-level name, not in a folder above it)."""
    for path in paths:
        if os.path.basename(path) == "setup.py" and os.path.isfile(path):
            _LINTED_SETUPS.update(_declared(path))


_LINTED_SETUPS: set[str] = set()


def is_extension_module(qual: str, sym: ModuleSymbols) -> bool:
    """``qual`` (a module, or a name in one) is a compiled module of the project."""
    declared, roots = _project(sym)
    if not qual or not roots or qual.partition(".")[0] == "torch":
        return False  # torch._C binds aten operators, which have autograd formulas
    if any((qual == name or qual.startswith(name + ".")) and not _has_source(name, roots, True)
           for name in declared):
        return True
    head = qual.partition(".")[0]
    if head in _LINTED_SETUPS and not _has_source(head, roots):
        return True  # a top-level extension another setup.py of the linted tree builds
    parts = qual.split(".")
    for i, part in enumerate(parts[1:], 1):  # a leaf name whose package setup.py composes
        if part in declared and not _has_source(".".join(parts[: i + 1]), roots):
            return True  # (`make_cuda_ext(name="x_cuda", module="pkg.ops")`)
    head, _, _ = qual.rpartition(".")
    return any(module and (_compiled(module, roots) or _built_here(module, sym))
               and not _has_source(module, roots) for module in (qual, head))


def _built_here(module: str, sym: ModuleSymbols) -> bool:
    """``module``, read from the importer's package root, is the file a setup.py above
    builds: ``from . import ops`` in ``softgroup/ops/functions.py`` of a namespace package
    (no ``softgroup/__init__.py``, so the importer is ``ops.functions``) names the
    ``softgroup.ops.ops`` the project's top-level setup.py declares, at the same place."""
    path = sym.source.path
    if not os.path.isfile(path):
        return False
    built = _built_at(os.path.dirname(os.path.abspath(path)))
    return bool(built) and os.path.join(_package_root(sym)[0], *module.split(".")) in built


def _built_at(folder: str) -> frozenset[str]:
    """Where the setup.py files of ``folder`` and above put their extensions (the setup.py's
    folder joined with the declared dotted name)."""
    found = _BUILT_AT.get(folder)
    if found is None:
        roots = _setup_names(folder)[1]
        found = _BUILT_AT[folder] = frozenset(
            os.path.join(root, *name.split("."))
            for root in roots for name in _declared(os.path.join(root, "setup.py")))
    return found


def is_python_module(qual: str, sym: ModuleSymbols) -> bool:
    """``qual`` has a ``.py`` file or a package in the project ``sym``'s module is part of."""
    return _has_source(qual, _project(sym)[1])


def _project(sym: ModuleSymbols) -> tuple[frozenset[str], tuple[str, ...]]:
    """(extension names its setup.py files declare, folders modules are found from)."""
    found = sym.source.__dict__.get("_gs_project")
    if found is None:  # once per file: source text with no file on disk has no project
        path = sym.source.path
        found = ((), ()) if not os.path.isfile(path) else _setup_names(
            os.path.dirname(os.path.abspath(path)))
        found = sym.source.__dict__["_gs_project"] = (found[0], (*found[1], *_package_root(sym)))
    return found


def _setup_names(folder: str) -> tuple[frozenset[str], tuple[str, ...]]:
    """(extension names declared, folders holding a setup.py) for ``folder`` and above."""
    entry = _SETUPS.get(folder)
    if entry is not None:
        return entry
    declared: set[str] = set()
    roots: list[str] = []
    here = folder
    for _ in range(_MAX_UP):
        setup = os.path.join(here, "setup.py")
        if os.path.isfile(setup):
            declared |= _declared(setup)
            roots.append(here)
        parent = os.path.dirname(here)
        if parent == here:
            break
        here = parent
    entry = _SETUPS[folder] = (frozenset(declared), tuple(roots))
    return entry


def _declared(path: str) -> frozenset[str]:
    """Module names given to ``*Extension(...)`` calls in a setup.py (never run, only read)."""
    try:
        with open(path, "rb") as handle:
            tree = ast.parse(handle.read())
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return frozenset()
    strings: dict[str, str] = {}
    makers: set[str] = set()
    for stmt in statements(tree.body):
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(
            stmt.targets[0], ast.Name
        ):
            name = stmt.targets[0].id
            if isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
                strings[name] = stmt.value.value
            elif any(_maker(n) for n in ast.walk(stmt.value)):
                makers.add(name)  # `extension = CUDAExtension if cuda else CppExtension`
    for node in ast.walk(tree):  # `def cmake_extension(name): return Extension(name, [])`
        if isinstance(node, ast.FunctionDef) and any(
            isinstance(r, ast.Return) and r.value is not None for r in ast.walk(node)
        ) and any(_maker(n) for n in ast.walk(node)):  # also `ext = CUDAExtension(...); return ext`
            makers.add(node.name)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and (_maker(node.func) or (
            isinstance(node.func, ast.Name) and node.func.id in makers
        )):
            arg = next((k.value for k in node.keywords if k.arg == "name"),
                       node.args[0] if node.args else None)
            text = _string(arg, strings)
            if text and all(part.isidentifier() for part in text.split(".")):
                found.add(text)
    return frozenset(found)


def _maker(node: ast.AST) -> bool:
    """``Extension``, ``CUDAExtension``, ``cpp_extension.CppExtension``... (not BuildExtension)."""
    name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")
    return isinstance(name, str) and name.endswith("Extension") and not name.startswith("Build")


def _string(node: ast.expr | None, strings: dict[str, str]) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and all(isinstance(v, ast.Constant) for v in node.values):
        return "".join(str(v.value) for v in node.values)  # f"nerfacc.csrc"
    if isinstance(node, ast.Name):
        return strings.get(node.id)
    return None


def _package_root(sym: ModuleSymbols) -> tuple[str, ...]:
    """The folder a module's dotted name starts from (``a/b/c.py`` as ``a.b.c``)."""
    depth = sym.module.count(".") + 1 + (1 if sym.source.is_package else 0)
    root = os.path.abspath(sym.source.path)
    for _ in range(depth):
        root = os.path.dirname(root)
    return (root,)


def _has_source(module: str, roots: tuple[str, ...], built: bool = False) -> bool:
    """A ``.py`` file or a package for ``module`` under one of ``roots`` (or ``roots/src``).

    With ``built``, a package whose own folder holds the setup.py that compiles ``module``
    (``gridding/setup.py`` building ``gridding`` beside ``gridding/__init__.py``, whose
    ``import gridding`` loads the installed extension) is the extension's source folder, not
    its Python code."""
    rel = module.replace(".", os.sep)
    for root in roots:
        for base in (root, os.path.join(root, "src")):
            stem = os.path.join(base, rel)
            if os.path.isfile(stem + ".py"):
                return True
            if os.path.isfile(os.path.join(stem, "__init__.py")) and not (
                    built and os.path.isfile(os.path.join(stem, "setup.py"))
                    and module in _declared(os.path.join(stem, "setup.py"))):
                return True
    return False


def _compiled(module: str, roots: tuple[str, ...]) -> bool:
    """A compiled file for ``module`` (``name.so``, ``name.cpython-311-....so``, ``.pyd``)."""
    folder_rel, _, leaf = module.rpartition(".")
    for root in roots:
        folder = os.path.join(root, folder_rel.replace(".", os.sep))
        stems = _LISTINGS.get(folder)
        if stems is None:
            try:
                files = os.listdir(folder)
            except OSError:
                files = []
            stems = _LISTINGS[folder] = frozenset(
                f.partition(".")[0] for f in files if f.endswith((".so", ".pyd")))
        if leaf in stems:
            return True
    return False


__all__ = ["forget", "is_extension_module", "is_python_module"]
