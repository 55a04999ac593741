"""Builder objects that compile an extension and hand it back from a method (GS215).

A project (often one that copied DeepSpeed's op builders) has a linted class whose method
returns what ``cpp_extension.load(...)`` built, directly or through another method of the
instance (``def load(self): return self.jit_load()``, ``jit_load`` returning
``load(name=..., sources=[...])``), also one inherited from a base class in another linted
module. ``Builder().load()`` is then the extension, as is a name bound to it at import
time or under ``global`` (``_kernels = KernelBuilder().load()`` in ``get_kernels()``,
which returns it), so ``get_kernels().softmax_backward(g)`` runs a kernel autograd cannot
see. A method returning anything else (a path, a dict of flags) is not one.
"""

from __future__ import annotations

import ast

from gradsmith.linter._proxies import resolve_class

_FOLLOW = 4  # base classes and self.method() calls followed


def built_extension(func: ast.expr, sym, sym_of: dict, valued_in) -> bool:
    """Whether ``func`` is ``Klass(...).method`` of a linted class whose method returns an
    extension; ``valued_in(owner, method)`` gives the extension predicate of a method."""
    if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call)):
        return False
    klass, owner = resolve_class(func.value.func, sym, sym_of)
    if klass is None:
        return False
    return _returns(klass, owner, func.attr, sym_of, valued_in, 0)


def _lookup(klass: ast.ClassDef, owner, name: str, sym_of: dict, depth: int = 0):
    """The ``def`` an instance of ``klass`` runs for ``name`` (own body, then the bases left
    to right) and the symbols of its module, else (None, None)."""
    for stmt in klass.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name == name:
            return stmt, owner
    for base in klass.bases if depth < _FOLLOW else ():
        other, where = resolve_class(base, owner, sym_of)
        if other is not None and other is not klass:
            found = _lookup(other, where, name, sym_of, depth + 1)
            if found[0] is not None:
                return found
    return None, None


def _returns(klass, owner, name: str, sym_of: dict, valued_in, depth: int) -> bool:
    method, where = _lookup(klass, owner, name, sym_of)
    if method is None or depth >= _FOLLOW or not method.args.args:
        return False
    cache = klass.__dict__.setdefault("_gs_built", {})
    if name in cache:
        return cache[name]
    cache[name] = False  # recursion ends here
    me, valued = method.args.args[0].arg, None
    found = False
    for sub in ast.walk(method):
        if not isinstance(sub, ast.Return) or sub.value is None:
            continue
        value = sub.value
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and isinstance(
                value.func.value, ast.Name) and value.func.value.id == me:
            found = _returns(klass, owner, value.func.attr, sym_of, valued_in, depth + 1)
        else:
            valued = valued or valued_in(where, method)
            found = valued(value)
        if found:
            break
    cache[name] = found
    return found


__all__ = ["built_extension"]
