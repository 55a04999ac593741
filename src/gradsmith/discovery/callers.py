"""Find the project's own callers of a Function: plain wrappers and Modules (private).

Many Functions take inputs their project prepares outside them: ``def logsig(path, degree):
prepare(...); return SigToLogSig.apply(...)`` builds a cache, ``def deform_grid(X, d, **kw)``
packs the keyword mapping forward unpacks, a Module passes ``self.weight`` and its state
tensors. Where synthesis for the Function itself finds nothing, the wrapper knows the contract:
:mod:`~gradsmith.discovery.through_callers` synthesises inputs for the wrapper and records what
it passes to ``apply``. This module only finds the wrappers, by reading source (``ast``), never
by calling anything.

A caller is a module-level function, or an ``nn.Module`` whose ``forward`` calls ``Fn.apply(...)``,
``Fn().apply(...)`` or an alias bound at module level (``fn = Fn.apply``). The Function's own
module is read first, then modules of its package that are already imported (nothing new is
imported: importing is the user's code running, and it costs time).
"""

from __future__ import annotations

import ast
import inspect
import sys
from dataclasses import dataclass
from typing import Any

#: At most this many of the package's other imported modules are read (time budget).
_PACKAGE_MODULES = 40


@dataclass(frozen=True)
class Caller:
    """A function or Module class of the project whose body calls the Function's ``apply``."""

    name: str
    obj: Any
    is_module: bool


def callers_of(fn: type) -> list[Caller]:
    """The project's functions and Module classes that call ``fn.apply``, own module first.

    Example:
        >>> import torch
        >>> class Twice(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x):
        ...         return 2 * x
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         return 2 * g
        >>> callers_of(Twice)  # defined in a doctest: no module source to read
        []
    """
    home = sys.modules.get(getattr(fn, "__module__", "") or "")
    if home is None:
        return []
    found = _in_module(fn, home)
    package = home.__name__.split(".")[0]
    others = [m for name, m in list(sys.modules.items())
              if m is not None and m is not home and name.split(".")[0] == package]
    for module in others[:_PACKAGE_MODULES]:
        if vars(module).get(fn.__name__) is fn:  # it names the Function: it may call it
            found += _in_module(fn, module)
    return found


def _in_module(fn: type, module: Any) -> list[Caller]:
    tree = _tree(module, fn.__name__)
    if tree is None:
        return []
    aliases = _aliases(tree, fn.__name__)
    namespace = vars(module)
    found: list[Caller] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                _calls_apply(node, fn.__name__, aliases):
            obj = namespace.get(node.name)
            if inspect.isfunction(obj):
                found.append(Caller(node.name, obj, False))
        elif isinstance(node, ast.ClassDef):
            forward = next((n for n in node.body if isinstance(n, ast.FunctionDef)
                            and n.name == "forward"), None)
            obj = namespace.get(node.name)
            if forward is not None and _calls_apply(forward, fn.__name__, aliases) \
                    and _is_module_class(obj):
                found.append(Caller(node.name, obj, True))
    return found


def _tree(module: Any, name: str) -> ast.Module | None:
    """The module's syntax tree, or None when its source cannot be read or never names
    ``name``'s apply (a text test first: parsing every module costs)."""
    path = getattr(module, "__file__", None)
    if not path or not str(path).endswith(".py"):
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError):
        return None
    if name not in text or ".apply" not in text:
        return None
    try:
        return ast.parse(text)
    except SyntaxError:
        return None


def _aliases(tree: ast.Module, name: str) -> set[str]:
    """Module-level names bound to the Function's apply (``ive = IveFunction.apply``)."""
    return {t.id for node in tree.body if isinstance(node, ast.Assign)
            and _is_apply(node.value, name, set()) for t in node.targets
            if isinstance(t, ast.Name)}


def _calls_apply(node: ast.AST, name: str, aliases: set[str]) -> bool:
    return any(isinstance(n, ast.Call) and _is_apply(n.func, name, aliases)
               for n in ast.walk(node))


def _is_apply(node: ast.AST, name: str, aliases: set[str]) -> bool:
    """``Fn.apply``, ``Fn().apply`` or an alias of it."""
    if isinstance(node, ast.Name):
        return node.id in aliases
    if not (isinstance(node, ast.Attribute) and node.attr == "apply"):
        return False
    owner = node.value.func if isinstance(node.value, ast.Call) else node.value
    return isinstance(owner, ast.Name) and owner.id == name


def _is_module_class(obj: Any) -> bool:
    try:
        import torch

        return isinstance(obj, type) and issubclass(obj, torch.nn.Module)
    except ImportError:  # pragma: no cover - torch is a dependency
        return False
