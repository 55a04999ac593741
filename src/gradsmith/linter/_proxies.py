"""Objects that stand for a compiled extension (GS215): an instance of a linted class whose
``__getattr__`` hands attribute reads on to an extension the class loads itself.

A lazy loader compiles the extension at its first use (``def __getattr__(self, key):
return getattr(self.module, key)`` with a ``module`` property returning
``cpp_extension.load(...)``); a helper returns the loader (``def load_extension(name,
sources): return LazyExtensionLoader(name, sources)``) and the project binds
``ext = utils.load_extension(...)`` at import time, so ``ext.fn_backward(...)`` runs the
kernel. A class whose ``__getattr__`` reads anything else (a dict of settings) is not one.
"""

from __future__ import annotations

import ast

from gradsmith.linter._kernels import module_named, modules_of
from gradsmith.linter._symbols import ModuleSymbols, dotted

_FOLLOW = 4  # imports and re-exports followed to the class


def resolve_class(func: ast.expr, sym: ModuleSymbols, sym_of: dict):
    """The linted ``class`` a call's callee names (``Loader``, ``utils.Loader``, through a
    package's re-exports) and the symbols of its module, else (None, None)."""
    parts = dotted(func)
    if not parts:
        return None, None
    modules = modules_of(sym_of)
    for _ in range(_FOLLOW):
        name, rest = parts[0], parts[1:]
        if not rest and name in sym.classes:
            return sym.classes[name], sym
        qual = sym.imports.get(name)
        if qual is None:
            return None, None
        qualparts = qual.split(".") + rest
        for cut in range(len(qualparts) - 1, 0, -1):  # the longest linted module first
            other = module_named(modules, ".".join(qualparts[:cut]), sym)
            if other is not None:
                sym, parts = other, qualparts[cut:]
                break
        else:
            return None, None
    return None, None


def forwarded(klass: ast.ClassDef) -> frozenset[str]:
    """Attributes of ``self`` the class's ``__getattr__`` reads (where it sends reads)."""
    hook = next((s for s in klass.body
                 if isinstance(s, ast.FunctionDef) and s.name == "__getattr__"), None)
    if hook is None or not hook.args.args:
        return frozenset()
    me = hook.args.args[0].arg
    return frozenset(n.attr for n in ast.walk(hook) if isinstance(n, ast.Attribute)
                     and isinstance(n.value, ast.Name) and n.value.id == me)


def extension_proxy(klass: ast.ClassDef, valued_in) -> bool:
    """Whether ``__getattr__`` forwards to an attribute that holds an extension: a method or
    property of that name returning one, or ``self.<name> = <extension>`` in a method.

    ``valued_in(method)`` gives a predicate on expressions for that method's scope.
    """
    cached = klass.__dict__.get("_gs_ext_proxy")
    if cached is not None:
        return cached
    klass.__dict__["_gs_ext_proxy"] = False  # recursion ends here
    targets = forwarded(klass)
    found = False
    for method in klass.body if targets else ():
        if not isinstance(method, ast.FunctionDef) or method.name == "__getattr__":
            continue
        valued = None
        for sub in ast.walk(method):
            value = None
            if isinstance(sub, ast.Return) and method.name in targets:
                value = sub.value
            elif isinstance(sub, ast.Assign) and any(
                isinstance(t, ast.Attribute) and t.attr in targets for t in sub.targets
            ):
                value = sub.value
            if value is None:
                continue
            valued = valued or valued_in(method)
            if valued(value):
                found = True
                break
        if found:
            break
    klass.__dict__["_gs_ext_proxy"] = found
    return found


__all__ = ["extension_proxy", "forwarded", "resolve_class"]
