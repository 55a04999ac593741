"""Where forward hands a parameter on: the code it calls, read as if it were forward's (private).

Real code shares one implementation among several Functions: ``sym_logm.forward`` returns
``sym_modeig.forward(ctx, M, sym_logm.value, ensure_symmetric)``, and only ``sym_modeig``
takes the ``eigh`` of ``M`` that makes ``M`` a symmetric matrix. The readers of formulas and
matrix structure follow a parameter, by position and by keyword, into:

- the class's own static helpers (``Owner._logm(x)``, ``cls._forward(x)``);
- another class's static methods or plain functions (``sym_modeig.forward(ctx, M, ...)``,
  also of another ``autograd.Function``), a class defined in the caller's own module;
- module-level functions defined in the caller's own module (``_solve(A, b)``);

a few levels deep, each function once (so recursion and mutual calls end). Read, never run.
"""

from __future__ import annotations

import ast
import inspect
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from gradsmith.discovery.source import parse

DEPTH = 3

# Never "the caller's package", whatever its folders are called: libraries, not project code.
_LIBRARIES = {"torch", "numpy", "scipy", "functorch", "triton", "gradsmith"}

ParamOf = Callable[[ast.AST, dict], "str | None"]


def by_name(node: ast.AST, names: dict[str, str]) -> str | None:
    """The parameter a plain name stands for (the default way to read an argument)."""
    return names.get(node.id) if isinstance(node, ast.Name) else None


def followed(fn: Any, tree: ast.AST, names: dict[str, str], owner: type | None = None,
             param_of: ParamOf = by_name, local: Callable[[ast.AST, dict], dict] | None = None,
             package: bool = False) -> Iterator[tuple[ast.AST, dict[str, str]]]:
    """Each function ``tree`` (the source of ``fn``, or of a method of ``owner``) passes
    parameters to, with its parameter -> our parameter, and in turn the functions those pass
    them on to (up to :data:`DEPTH` levels). ``local(tree, names)`` adds a callee's local
    aliases (``x = input``) before its own calls are read. ``package``: also module-level
    functions imported from another module of the caller's top-level package (``from
    .transformer_slow import integrate_numeric``).

    Example:
        >>> import torch
        >>> class Shared:
        ...     @staticmethod
        ...     def forward(ctx, A, scale=1.0):
        ...         return torch.linalg.eigh(A)[0] * scale
        >>> def forward(ctx, M, c):
        ...     return Shared.forward(ctx, scale=c, A=M)
        >>> [passed for _, passed in followed(forward, parse(forward), {"M": "M", "c": "c"},
        ...                                   param_of=by_name)]
        [{'scale': 'c', 'A': 'M'}]
    """
    scope = getattr(fn, "__globals__", None) or {}
    seen = {id(getattr(fn, "__code__", fn))}
    queue = [(tree, names, scope, 0)]
    while queue:
        current, known, where, depth = queue.pop(0)
        if depth >= DEPTH:
            continue
        for node in ast.walk(current):
            if not isinstance(node, ast.Call):
                continue
            function = _callee(node, where, owner, package)
            if function is None or id(function.__code__) in seen:
                continue
            helper = parse(function)
            passed = _passed(function, node, known, param_of)
            if helper is None or not passed:
                continue
            seen.add(id(function.__code__))
            passed = local(helper, passed) if local is not None else passed
            yield helper, passed
            queue.append((helper, passed, function.__globals__, depth + 1))


def _callee(node: ast.Call, scope: dict, owner: type | None,
            package: bool = False) -> types.FunctionType | None:
    """The Python function a call runs: ``Cls.method`` (static or plain, not bound) or a
    module-level function of the caller's module (``package``: or of its top-level package);
    ``None`` for anything else."""
    func = node.func
    if isinstance(func, ast.Name):
        found = scope.get(func.id)
        here = scope.get("__name__") or ""
        if isinstance(found, types.FunctionType) and (found.__module__ == here or (
                package and _same_package(found.__module__ or "", here, scope))):
            return found
        return None
    if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)):
        return None
    holder = owner if owner is not None and func.value.id in (owner.__name__, "cls") else (
        scope.get(func.value.id))
    if not isinstance(holder, type) or (holder is not owner
                                         and holder.__module__ != scope.get("__name__")):
        return None
    try:
        method = inspect.getattr_static(holder, func.attr)
    except AttributeError:
        return None
    method = method.__func__ if isinstance(method, staticmethod) else method
    return method if isinstance(method, types.FunctionType) else None


def _same_package(module: str, here: str, scope: dict) -> bool:
    """``module`` is of the caller's top-level package: by name, or (a file imported on its
    own, under another name, while an installed copy of its package is first on sys.path) by
    a folder of the caller's path named as ``module``'s package."""
    top = module.split(".")[0]
    if not top or "." not in module or top in _LIBRARIES:
        return False
    if "." in here:
        return top == here.split(".")[0]
    return top in Path(scope.get("__file__") or "").parts[:-1]


def _passed(function: types.FunctionType, call: ast.Call, names: dict[str, str],
            param_of: ParamOf) -> dict[str, str]:
    """The callee's parameter -> our parameter, for arguments passed by position (up to a
    ``*args``) and by keyword."""
    try:
        params = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return {}
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY,
                                                       p.POSITIONAL_OR_KEYWORD)]
    passed: dict[str, str] = {}
    for theirs, arg in zip(positional, call.args):
        if isinstance(arg, ast.Starred):
            break
        if (ours := param_of(arg, names)) is not None:
            passed[theirs] = ours
    keywords = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    for kw in call.keywords:
        if kw.arg in keywords and (ours := param_of(kw.value, names)) is not None:
            passed[kw.arg] = ours
    return passed
