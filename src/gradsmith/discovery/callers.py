"""Find the project's own callers of a Function: plain wrappers and Modules (private).

Many Functions take inputs their project prepares outside them: ``def logsig(path, degree):
prepare(...); return SigToLogSig.apply(...)`` builds a cache, ``def deform_grid(X, d, **kw)``
packs the keyword mapping forward unpacks, a Module passes ``self.weight`` and its state
tensors. Where synthesis for the Function itself finds nothing, the wrapper knows the contract:
:mod:`~gradsmith.discovery.through_callers` synthesises inputs for the wrapper and records what
it passes to ``apply``. This module only finds the wrappers, by reading source (``ast``), never
by calling anything.

A caller is a module-level function, or an ``nn.Module`` one of whose methods (``forward``, or
a helper forward calls) calls ``Fn.apply(...)``, ``Fn().apply(...)`` or an alias bound at module
level (``fn = Fn.apply``), under any name the module binds the Function to (``from .ops import
Warp as _Warp``). The Function's own module is read first, then modules of its package that are
already imported (nothing new is imported: importing is the user's code running, and it costs
time).
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
        found += _in_module(fn, module)  # only where it names the Function: it may call it
    return found


def _in_module(fn: type, module: Any) -> list[Caller]:
    namespace = vars(module)
    names = {k for k, v in list(namespace.items()) if v is fn}  # `import Warp as _Warp`
    tree = _tree(module, names)
    if tree is None:
        return []
    aliases = _aliases(tree, names)
    found: list[Caller] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                _calls_apply(node, names, aliases):
            obj = namespace.get(node.name)
            if inspect.isfunction(obj):
                found.append(Caller(node.name, obj, False))
        elif isinstance(node, ast.ClassDef) and _calls_apply(node, names, aliases):
            obj = namespace.get(node.name)  # forward, or a method forward calls (self._run)
            if _is_module_class(obj):
                found.append(Caller(node.name, obj, True))
    return found


def _tree(module: Any, names: set[str]) -> ast.Module | None:
    """The module's syntax tree, or None when its source cannot be read or never names
    the Function and an ``apply`` (a text test first: parsing every module costs)."""
    path = getattr(module, "__file__", None)
    if not names or not path or not str(path).endswith(".py"):
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError):
        return None
    if ".apply" not in text or not any(name in text for name in names):
        return None
    try:
        return ast.parse(text)
    except SyntaxError:
        return None


def _aliases(tree: ast.Module, names: set[str]) -> set[str]:
    """Module-level names bound to the Function's apply (``ive = IveFunction.apply``)."""
    return {t.id for node in tree.body if isinstance(node, ast.Assign)
            and _is_apply(node.value, names, set()) for t in node.targets
            if isinstance(t, ast.Name)}


def _calls_apply(node: ast.AST, names: set[str], aliases: set[str]) -> bool:
    return any(isinstance(n, ast.Call) and _is_apply(n.func, names, aliases)
               for n in ast.walk(node))


def _is_apply(node: ast.AST, names: set[str], aliases: set[str]) -> bool:
    """``Fn.apply``, ``Fn().apply`` or an alias of it."""
    if isinstance(node, ast.Name):
        return node.id in aliases
    if not (isinstance(node, ast.Attribute) and node.attr == "apply"):
        return False
    owner = node.value.func if isinstance(node.value, ast.Call) else node.value
    return isinstance(owner, ast.Name) and owner.id in names


def _is_module_class(obj: Any) -> bool:
    try:
        import torch

        return isinstance(obj, type) and issubclass(obj, torch.nn.Module)
    except ImportError:  # pragma: no cover - torch is a dependency
        return False
