"""Functions a module is given at import time by a registrar it hands itself to (GS215).

C libraries reached through ctypes or an FFI often bind their functions into a Python
module when it is imported: the module ends with ``_init_api("lib.sparse", __name__)`` (or
passes ``globals()``, ``locals()`` at module level as torch.utils.ffi's generated
``_import_symbols(locals())`` does, ``sys.modules[__name__]``, its own dotted name), and
its helpers (or modules importing it: ``pointnet2.gather_points_wrapper(...)``) call
names that no statement of the module binds (``_CAPI_SpMM(...)``). Such a name is a
function of the C library: autograd cannot see into it.

A module with a star import is left to :func:`gradsmith.linter._unbound.star` (the name
may come from there).
"""

from __future__ import annotations

import ast

from gradsmith.linter._symbols import ModuleSymbols, dotted, import_time


def registers_itself(sym: ModuleSymbols) -> bool:
    """Whether a call at import time of ``sym``'s module is given the module itself."""
    source = sym.source
    found = source.__dict__.get("_gs_registers")
    if found is None:
        found = False
        text = source.text
        module = sym.module
        if "__name__" in text or "globals()" in text or "locals()" in text or (
                module and module in text):
            found = any(
                isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and any(
                    _names_module(arg, module)
                    for arg in (*stmt.value.args, *(k.value for k in stmt.value.keywords)))
                for stmt in import_time(source.tree.body))
        source.__dict__["_gs_registers"] = found
    return found


def _names_module(expr: ast.expr, module: str) -> bool:
    """``__name__``, ``globals()`` (or ``locals()``: at module level the same namespace),
    ``sys.modules[__name__]`` or the module's dotted name."""
    if isinstance(expr, ast.Name):
        return expr.id == "__name__"
    if isinstance(expr, ast.Call):
        return dotted(expr.func) in (["globals"], ["locals"]) and not expr.args
    if isinstance(expr, ast.Subscript):
        return dotted(expr.value) == ["sys", "modules"] and _names_module(expr.slice, module)
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str) and module:
        return "." in expr.value and (expr.value == module or module.endswith("." + expr.value))
    return False


__all__ = ["registers_itself"]
