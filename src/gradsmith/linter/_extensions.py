"""Compiled extensions of the linted code: the names of a module bound to a C++/CUDA
extension, so that a call through one runs a kernel autograd cannot see (GS215).

A name is an extension when it is bound to

- a module the project builds itself: one named by an ``Extension``, ``CUDAExtension``,
  ``CppExtension`` (any ``*Extension(...)``, or a name bound to one) in a ``setup.py`` of the
  file's folder or a folder above, or a compiled file (``SCN.cpython-311-x86_64-linux-gnu.so``,
  ``.pyd``) where the import points. A Python module or package of that name in the tree
  wins: it is Python code, not an extension (``import foo._ext as ext``, ``from . import
  SCN``, ``from .SCN import *``, ``from foo._ext import fn``);
- ``torch.utils.cpp_extension.load(...)`` or ``load_inline(...)`` at module level or under
  ``global`` in a function, or a custom ``torch.ops.<namespace>``; a class of the module
  that keeps one (``Accelerated.module = load(...)``, reached as ``Accelerated.conv.fn``),
  or an ``import`` of the name one was built under (``load(name='plugin', ...)``);
- such a name of another linted module (``from .backend import _backend``), an attribute of
  one (``fn = module.fn``, ``getattr(_C, name)``), or what a helper returns when its
  ``return`` gives one (``def get_backend(): ... return _C``).

A call through ``X.apply`` or of a CapWords name with no underscore (a class: a handle, a
key) is not a kernel: a Function's ``apply`` has its own backward.
"""

from __future__ import annotations

import ast

from gradsmith.linter._builders import built_extension
from gradsmith.linter._kernels import finder, module_named, modules_of
from gradsmith.linter._loaders import IMPORT_BLOCKS, is_jiterator, is_load, loaded
from gradsmith.linter._project import is_extension_module, is_python_module
from gradsmith.linter._proxies import extension_proxy, resolve_class
from gradsmith.linter._registered import registers_itself
from gradsmith.linter._symbols import ModuleSymbols, dotted, import_time, statements
from gradsmith.linter._unbound import free, star

_FOLLOW = 4  # re-exports and helpers followed across modules


def names(sym: ModuleSymbols, sym_of: dict, depth: int = 0) -> frozenset[str]:
    """Names of ``sym``'s module bound to a compiled extension (computed once per file).

    ``sym_of`` maps every linted source to its symbols.
    """
    source = sym.source
    found = source.__dict__.get("_gs_ext_names")
    if found is not None:
        return found
    source.__dict__["_gs_ext_names"] = frozenset()  # an import cycle ends here
    known = set(loaded(sym))
    for local, target in sym.imports.items():
        if _imported(target, sym, sym_of, depth):
            known.add(local)
    for base in sym.stars if depth < _FOLLOW else ():  # `from .utils import *` re-exports
        other = module_named(modules_of(sym_of), base, sym)
        if other is not None and other is not sym:
            known.update(n for n in names(other, sym_of, depth + 1) if not n.startswith("_"))
    scope = Scope(sym, sym_of, known, depth)
    for _ in range(2):  # `module = load_inline(...)` then `fn = module.fn`
        before = len(known)
        for stmt in import_time(source.tree.body, IMPORT_BLOCKS):
            if isinstance(stmt, ast.Assign) and scope.valued(stmt.value):
                known.update(t.id for t in stmt.targets if isinstance(t, ast.Name))
            elif isinstance(stmt, ast.ClassDef):  # `dot_backward = {"cpu": ext_cpu.fn, ...}`
                for attr in _class_extensions(stmt, scope):
                    known.update((f"{stmt.name}.{attr}", f"*.{attr}"))
        if len(known) == before:
            break
    if "global" in source.text:
        known |= _global_builds(source.tree, scope)
    found = source.__dict__["_gs_ext_names"] = frozenset(known)
    return found


def _global_builds(tree: ast.Module, scope: Scope) -> set[str]:
    """Module names a function (or method) binds under ``global`` to an extension it builds
    (``global _kernels`` then ``_kernels = KernelBuilder().load()``)."""
    found: set[str] = set()
    for stmt in statements(tree.body):
        if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        body = list(statements(stmt.body))  # statements only: far cheaper than ast.walk
        shared = {n for s in body if isinstance(s, ast.Global) for n in s.names}
        if not shared:
            continue
        inner = None
        for sub in body:
            if isinstance(sub, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id in shared for t in sub.targets):
                inner = inner or scope.with_locals(stmt)
                if inner.valued(sub.value):
                    found |= {t.id for t in sub.targets if isinstance(t, ast.Name)
                              and t.id in shared}
    return found


def _class_extensions(klass: ast.ClassDef, scope: Scope) -> set[str]:
    """Class attributes bound to extensions: ``table = {"cpu": ext.fn}``, and lietorch's
    ``forward_op, backward_op = lietorch_backends.expm, lietorch_backends.expm_backward``
    (a base class's classmethod backward then calls ``cls.backward_op(...)``)."""
    found: set[str] = set()
    for sub in klass.body:
        if not isinstance(sub, ast.Assign):
            continue
        for target in sub.targets:
            if isinstance(target, ast.Name) and scope.valued(sub.value):
                found.add(target.id)
            elif isinstance(target, ast.Tuple) and isinstance(sub.value, ast.Tuple) and len(
                    target.elts) == len(sub.value.elts):
                found.update(t.id for t, v in zip(target.elts, sub.value.elts)
                             if isinstance(t, ast.Name) and scope.valued(v))
    return found


class Scope:
    """What is an extension in one function (or module): the module's names plus locals."""

    def __init__(self, sym: ModuleSymbols, sym_of: dict, known, depth: int = 0) -> None:
        self.sym, self.sym_of, self.known, self.depth = sym, sym_of, known, depth

    def with_locals(self, node: ast.AST) -> Scope:
        """This scope plus the locals of ``node`` every assignment binds to an extension
        (``bw_fn = get_minkowski_function(...)``); its other locals and parameters shadow
        the module's names."""
        values: dict[str, list[ast.expr | None]] = {}
        args = getattr(node, "args", None)
        for a in (*args.posonlyargs, *args.args, *args.kwonlyargs) if args is not None else ():
            values[a.arg] = [None]
        for sub in ast.walk(node):
            if isinstance(sub, ast.Assign):
                for target in sub.targets:
                    if isinstance(target, ast.Name):
                        values.setdefault(target.id, []).append(sub.value)
                    else:
                        for n in ast.walk(target):
                            if isinstance(n, ast.Name):
                                values.setdefault(n.id, []).append(None)
        if not values:
            return self
        known = set(self.known) - set(values)
        inner = Scope(self.sym, self.sym_of, known, self.depth)
        for _ in range(2):
            for name, exprs in values.items():
                if name not in known and all(e is not None and inner.valued(e) for e in exprs):
                    known.add(name)
        return inner

    def valued(self, expr: ast.expr | None) -> bool:
        """Whether ``expr``'s value is an extension or a function of one."""
        if isinstance(expr, ast.Name):
            return expr.id in self.known
        if isinstance(expr, ast.Attribute):
            parts = dotted(expr)  # `Fn.dot_backward`: a class attribute holding extensions
            return self.valued(expr.value) or bool(parts) and ".".join(parts[:2]) in self.known
        if isinstance(expr, ast.IfExp):
            return self.valued(expr.body) or self.valued(expr.orelse)
        if isinstance(expr, ast.Subscript):  # `table[device.type]`
            return self.valued(expr.value)
        if isinstance(expr, ast.Dict):  # `{"cpu": ext_cpu.fn, "cuda": ext_cuda.fn}`
            return any(v is not None and self.valued(v) for v in expr.values)
        if not isinstance(expr, ast.Call):
            return False
        parts = dotted(expr.func) or []
        if parts == ["getattr"] and expr.args:
            return self.valued(expr.args[0])
        if is_load(expr, self.sym):
            return True
        return self.depth < _FOLLOW and (
            self.returns(expr.func) or self.proxy(expr.func) or self.built(expr.func) or any(
                self.valued(arg) and self._wraps(expr.func, i) for i, arg in enumerate(expr.args)))

    def built(self, func: ast.expr) -> bool:
        """``func`` is ``Builder().load``: a linted class's method returning an extension
        (see _builders.py)."""
        depth = self.depth + 1

        def valued_in(owner: ModuleSymbols, method: ast.FunctionDef):
            return Scope(owner, self.sym_of, names(owner, self.sym_of, depth),
                         depth).with_locals(method).valued

        return built_extension(func, self.sym, self.sym_of, valued_in)

    def proxy(self, func: ast.expr) -> bool:
        """``func`` is a linted class whose instances stand for an extension it loads
        itself (a lazy loader's ``__getattr__``; see _proxies.py)."""
        klass, owner = resolve_class(func, self.sym, self.sym_of)
        if klass is None:
            return False
        depth = self.depth + 1

        def valued_in(method: ast.FunctionDef):
            return Scope(owner, self.sym_of, names(owner, self.sym_of, depth),
                         depth).with_locals(method).valued

        return extension_proxy(klass, valued_in)

    def _helper(self, func: ast.expr) -> ast.FunctionDef | None:
        """The linted function ``func`` names (this module or another linted one)."""
        parts = dotted(func)
        if not parts:
            return None
        node = self.sym.source.functions.get(parts[0]) if len(parts) == 1 else None
        if node is None:
            node = finder(self.sym, self.sym_of)(func)
        return node if isinstance(node, ast.FunctionDef) else None

    def _wraps(self, func: ast.expr, index: int) -> bool:
        """``func`` is a linted helper that hands back its argument ``index`` or a closure
        calling it (``def _wrap(fn): def wrapped(*a): return fn(*a)  return wrapped``), as
        ``signature_backward = _wrap(_impl.signature_backward)`` does."""
        node = self._helper(func)
        if node is None or index >= len(node.args.posonlyargs + node.args.args):
            return False
        param = (node.args.posonlyargs + node.args.args)[index].arg
        inner = {sub.name: sub for sub in node.body if isinstance(sub, ast.FunctionDef)}
        for sub in ast.walk(node):
            if not isinstance(sub, ast.Return) or not isinstance(sub.value, ast.Name):
                continue
            if sub.value.id == param:
                return True
            closure = inner.get(sub.value.id)
            if closure is not None and any(
                    isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id == param
                    for c in ast.walk(closure)):
                return True
        return False

    def returns(self, func: ast.expr) -> bool:
        """``func`` is a helper (this module or a linted one) returning an extension."""
        parts = dotted(func)
        if not parts:
            return False
        node = self.sym.source.functions.get(parts[0]) if len(parts) == 1 else None
        owner = self.sym
        if node is None:
            find = finder(self.sym, self.sym_of)
            node = find(func)
            owner = find.owner(node) if node is not None else None
        if not isinstance(node, ast.FunctionDef) or owner is None:
            return False
        cached = node.__dict__.get("_gs_returns_ext")
        if cached is None:
            node.__dict__["_gs_returns_ext"] = False  # recursion ends here
            scope = Scope(owner, self.sym_of, names(owner, self.sym_of, self.depth + 1),
                          self.depth + 1).with_locals(node)
            cached = node.__dict__["_gs_returns_ext"] = any(
                isinstance(sub, ast.Return) and scope.valued(sub.value)
                for sub in ast.walk(node))
        return cached


def kernel_call(call: ast.Call, scope: Scope, local) -> str | None:
    """The text naming ``call`` when it runs a compiled extension, else None."""
    parts = dotted(call.func)
    if not parts:  # `get_backend().fn(g)`, `_lazy_func("bwd")(g)`
        return "" if scope.valued(call.func) else None
    head, last = parts[0], parts[-1]
    if _class_name(last) or last == "apply" and len(parts) > 1 and parts[-2][:1].isupper():
        return None  # a class (a handle, a key) or another Function's apply
    if head in scope.known:
        return ""
    if head in ("cls", "self") and len(parts) == 2 and f"*.{last}" in scope.known:
        return ""  # `cls.backward_op(...)`: a (sub)class of the module binds it to one
    if head in local:
        return None
    target = scope.sym.imports.get(head)
    if len(parts) > 2 and target and is_extension_module(
        ".".join([target, *parts[1:-1]]), scope.sym
    ):
        return ""  # `import sparseconvnet.SCN` then `sparseconvnet.SCN.fn(...)`
    if len(parts) >= 2 and target and scope.depth < _FOLLOW:
        other = module_named(modules_of(scope.sym_of), target, scope.sym)
        if other is not None and other is not scope.sym and parts[1] in names(
                other, scope.sym_of, scope.depth + 1):
            return ""  # `from . import impl` then `impl.fn(...)`, `fn = _wrap(_ext.fn)` there,
            # or `from .. import src` then `src.gpu.fn(...)`, `gpu = load(...)` in src
        if other is not None and other is not scope.sym and len(parts) == 2 and \
                not other.stars and free(other, last) and registers_itself(other):
            return " (bound at import time)"  # `pointnet2.fn(...)`, an FFI module's symbol
    if len(parts) == 1 and star(scope.sym, head, scope.sym_of):
        return " (star import)"
    if len(parts) == 1 and not scope.sym.stars and free(scope.sym, head) \
            and registers_itself(scope.sym):
        return " (bound at import time)"  # `_CAPI_Fn(...)` after `_init_api(..., __name__)`
    return None


def _class_name(name: str) -> bool:
    """``CoordinateMapKey``, ``Metadata``: CapWords with no underscore (an extension's
    functions may be capitalised too, but carry one: ``Convolution_updateGradInput``)."""
    return name[:1].isupper() and "_" not in name and not name.isupper()


def _imported(target: str, sym: ModuleSymbols, sym_of: dict, depth: int) -> bool:
    """An import target that is an extension, or a linted module's extension name."""
    if is_extension_module(target, sym):
        return True
    module, _, name = target.rpartition(".")
    other = module_named(modules_of(sym_of), module, sym)
    if other is None or depth >= _FOLLOW:
        return False
    return name in names(other, sym_of, depth + 1) or (
        star(other, name, sym_of) and not is_python_module(target, sym))  # not a submodule


__all__ = ["Scope", "free", "is_jiterator", "kernel_call", "loaded", "names", "star"]
