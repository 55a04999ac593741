"""Extensions the linted code builds while it runs, read from the statements that build them
(GS215): ``torch.utils.cpp_extension.load(...)``/``load_inline(...)`` at import time or under
``global``, kept on a class or imported by the name it was built under; an alias of a custom
``torch.ops.<namespace>``; a ``torch.cuda.jiterator`` kernel."""

from __future__ import annotations

import ast

from gradsmith.linter._symbols import ModuleSymbols, dotted, import_time, statements

# Module-level blocks whose statements run at import time (a with block included here).
IMPORT_BLOCKS = (ast.If, ast.Try, ast.With)
_OPS_BUILTIN = frozenset({"aten", "prims"})


def loaded(sym: ModuleSymbols) -> frozenset[str]:
    """Names bound to ``cpp_extension.load(...)``/``load_inline(...)`` at import time or
    under ``global``, to a custom ``torch.ops.<namespace>``, or to a jiterator kernel."""
    source = sym.source
    found = set()
    text = source.text
    if "load" in text or "torch.ops" in text or "jiterator" in text:
        for stmt in import_time(source.tree.body, IMPORT_BLOCKS):
            if isinstance(stmt, ast.Assign) and (is_load(stmt.value, sym) or _is_ops(stmt.value)
                                                 or is_jiterator(stmt.value, sym)):
                found |= {t.id for t in stmt.targets if isinstance(t, ast.Name)}
    if "global" in text and "cpp_extension" in text:  # `global _C` then `_C = load(...)`
        for stmt in statements(source.tree.body):
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                shared = {n for s in ast.walk(stmt) if isinstance(s, ast.Global) for n in s.names}
                for sub in ast.walk(stmt) if shared else ():
                    if isinstance(sub, ast.Assign) and is_load(sub.value, sym):
                        found |= {t.id for t in sub.targets
                                  if isinstance(t, ast.Name) and t.id in shared}
    if "cpp_extension" in text:
        found |= _held(source.tree, sym)
    return frozenset(found)


def _held(tree: ast.Module, sym: ModuleSymbols) -> set[str]:
    """Extensions a function of the module compiles and keeps: on a class of the module
    (``Accelerated.module = load(...)`` in a static property, used as
    ``Accelerated.conv.fn``), or imported by the name it was built under
    (``load(name='renderutils_plugin', ...)`` then ``import renderutils_plugin``)."""
    classes = {c.name for c in tree.body if isinstance(c, ast.ClassDef)}
    built: set[str] = set()
    found: set[str] = set()
    imports = []
    for sub in ast.walk(tree):
        if isinstance(sub, ast.Import):
            imports.append(sub)
        elif isinstance(sub, ast.Assign) and is_load(sub.value, sym):
            found |= {t.value.id for t in sub.targets if isinstance(t, ast.Attribute)
                      and isinstance(t.value, ast.Name) and t.value.id in classes}
        if isinstance(sub, ast.Call) and is_load(sub, sym):
            name = next((k.value for k in sub.keywords if k.arg == "name"),
                        sub.args[0] if sub.args else None)
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                built.add(name.value)
    for node in imports:
        found |= {a.asname or a.name for a in node.names if a.name in built}
    return found


def _is_ops(value: ast.expr | None) -> bool:
    """``torch.ops.my_ext``: an alias of a custom operator namespace."""
    parts = dotted(value) if value is not None else None
    return bool(parts) and len(parts) == 3 and parts[:2] == ["torch", "ops"] \
        and parts[2] not in _OPS_BUILTIN


def is_jiterator(value: ast.expr | None, sym: ModuleSymbols) -> bool:
    """``torch.cuda.jiterator._create_jit_fn(code)`` (or the multi-output one): a kernel
    compiled from a C++ string at run time, as opaque to autograd as an extension."""
    if not isinstance(value, ast.Call):
        return False
    parts = dotted(value.func) or [""]
    origin = ".".join([sym.imports.get(parts[0], parts[0]), *parts[1:]])
    return "jiterator" in origin and parts[-1] in ("_create_jit_fn", "_create_multi_output_jit_fn")


def is_load(value: ast.expr | None, sym: ModuleSymbols) -> bool:
    """``load(name=..., sources=[...])``/``load_inline(...)`` of ``torch.utils.cpp_extension``
    (known by its import, also under another name, or by its ``sources`` keywords)."""
    if not isinstance(value, ast.Call):
        return False
    parts = dotted(value.func) or [""]
    origin = ".".join([sym.imports.get(parts[0], parts[0]), *parts[1:]])
    if origin.rpartition(".")[2] not in ("load", "load_inline"):
        return False
    return "cpp_extension." in origin or any(
        k.arg in ("sources", "cpp_sources", "cuda_sources") for k in value.keywords)


__all__ = ["IMPORT_BLOCKS", "is_jiterator", "is_load", "loaded"]
