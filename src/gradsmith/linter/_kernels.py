"""Triton kernels of the linted code: which pointer parameters a ``@triton.jit`` body stores
through, so that a launch ``kernel[grid](x, ...)`` counts as an in-place write of ``x``.

A parameter is written when it is the base of the pointer given to ``tl.store`` (or an
atomic): the names of the pointer expression, followed back through the kernel's own
assignments (``ptrs = X + offs``, ``tl.make_block_ptr(base=X, ...)``). Values read with
``tl.load`` are data, not pointers, so an index loaded from ``Idx`` does not make ``Idx``
written.
"""

from __future__ import annotations

import ast
import re

from gradsmith.linter._symbols import dotted, module_aliases
from gradsmith.linter._syspath import forget as forget_paths
from gradsmith.linter._syspath import module_on_path

#: Decorators that make a function a Triton kernel (``@triton.jit``, ``@triton.autotune``...).
KERNEL_DECORATORS = frozenset({"jit", "autotune", "heuristics"})
_STORES = frozenset({"store", "atomic_add", "atomic_max", "atomic_min", "atomic_xchg",
                     "atomic_cas", "atomic_and", "atomic_or", "atomic_xor"})
#: Calls whose result is still a pointer into their argument.
_POINTER_CALLS = frozenset({"make_block_ptr", "advance", "multiple_of", "max_contiguous",
                            "to", "cast", "make_tensor_descriptor"})
_MAX_ROUNDS = 8
_POINTER_TYPE = re.compile(r"pointer|tensor|ptr|block_type", re.I)
_SCALAR = re.compile(r"\b(u?int\d*|float\d*|bfloat16|int|float|bool|int1|constexpr)\b")


def is_custom_op(node: ast.AST) -> bool:
    """A ``def`` registered with ``@torch.library.custom_op`` (opaque to autograd unless a
    formula is registered for it), or with a project's wrapper of it that names the operator
    the same way (``@cute_op("quack::_softmax_backward", ...)``: a decorator ending in ``op``
    given a ``"namespace::name"``, or a name and custom_op's ``mutates_args=``, as
    ``@register_kernel_op("swiglu_bwd", mutates_args=("g",))``, or only custom_op's
    ``mutates_args=``, the name taken from the def: ``@xma_op(mutates_args={"dg"})``)."""
    return isinstance(node, ast.FunctionDef) and any(
        _registers_op(d) for d in node.decorator_list)


def _registers_op(decorator: ast.expr) -> bool:
    last = (dotted(decorator.func if isinstance(decorator, ast.Call) else decorator) or [""])[-1]
    if last == "custom_op":
        return True
    last = last.lower()
    if isinstance(decorator, ast.Call) and last.endswith("op") and not decorator.args and any(
            k.arg == "mutates_args" for k in decorator.keywords):
        return True  # `@xma_op(mutates_args={"dg"})`: the wrapper names the op after the def
    if not isinstance(decorator, ast.Call) or not (
            last.endswith("op") or "custom_op" in last) or not (
            decorator.args and isinstance(decorator.args[0], ast.Constant)):
        return False
    name = decorator.args[0].value
    if any(k.arg == "mutates_args" for k in decorator.keywords):
        return isinstance(name, str)  # custom_op's own keyword: the wrapper adds the namespace
    return isinstance(name, str) and "::" in name and " " not in name


def is_kernel(node: ast.AST) -> bool:
    """A ``def`` decorated with ``triton.jit`` (or autotune/heuristics around it), or
    jitted by assignment at module level (``k = triton.jit(k)``, see :func:`jitted_names`)."""
    if not isinstance(node, ast.FunctionDef):
        return False
    if node.__dict__.get("_gs_jitted"):
        return True
    for dec in node.decorator_list:
        parts = dotted(dec.func if isinstance(dec, ast.Call) else dec)
        if parts and parts[-1] in KERNEL_DECORATORS and (len(parts) == 1 or parts[0] in (
            "triton", "tl", "libentry", "libtuner"
        ) or parts[-1] == "jit"):
            return True
    return False


def jitted_names(source) -> frozenset[str]:
    """Names rebound at module level to ``triton.jit(name)`` (possibly wrapped again:
    ``k = triton.heuristics(...)(k)``); computed once per file and marked on the ``def``."""
    found = source.__dict__.get("_gs_jitted_names")
    if found is None:
        names = set()
        if "jit(" in source.text:
            for stmt in source.tree.body:
                if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(
                    stmt.targets[0], ast.Name
                ) and isinstance(stmt.value, ast.Call):
                    parts = dotted(stmt.value.func) or []
                    args = stmt.value.args
                    if parts and parts[-1] == "jit" and args and isinstance(args[0], ast.Name) \
                            and args[0].id == stmt.targets[0].id:
                        names.add(args[0].id)
            for name in names:
                node = source.functions.get(name)
                if isinstance(node, ast.FunctionDef):
                    node.__dict__["_gs_jitted"] = True
        found = source.__dict__["_gs_jitted_names"] = frozenset(names)
    return found


def _names(expr: ast.AST) -> set[str]:
    """Names an expression's value can point into (not entering non-pointer calls)."""
    out: set[str] = set()
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Name):
            out.add(node.id)
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name in _POINTER_CALLS:  # the pointer is the first argument: a block's
                stack.extend(node.args[:1])  # shape, strides and offsets are not written
                stack.extend(k.value for k in node.keywords if k.arg in (None, "base"))
                if isinstance(func, ast.Attribute):
                    stack.append(func.value)
        elif isinstance(node, (ast.BinOp, ast.UnaryOp, ast.IfExp, ast.Subscript, ast.Attribute,
                               ast.Tuple, ast.List, ast.Starred)):
            stack.extend(ast.iter_child_nodes(node))
    return out


def stored_params(kernel: ast.FunctionDef) -> dict[int, list[frozenset[str]]]:
    """Parameter index -> the compile-time flags guarding each store through it.

    An empty flag set is an unconditional store; ``{"IN_PLACE"}`` a store under
    ``if IN_PLACE:`` (a ``tl.constexpr`` or ALL-CAPS parameter: a launch option) and
    ``{"!IN_PLACE"}`` one under its ``else:``. A pointer chosen by an option
    (``out = b if A_TO_B else a``) carries the option the same way.
    """
    cache = kernel.__dict__.get("_gs_stored")
    if cache is not None:
        return cache
    params = [a.arg for a in (*kernel.args.posonlyargs, *kernel.args.args)]
    options = {a.arg for a in (*kernel.args.posonlyargs, *kernel.args.args)
               if a.arg.isupper() or (a.annotation is not None
                                      and "constexpr" in ast.unparse(a.annotation))}
    # `n: tl.int32`, `eps: tl.float32`: a scalar, an offset in `ptr + b * n`, never written
    scalars = {a.arg for a in (*kernel.args.posonlyargs, *kernel.args.args)
               if a.annotation is not None and _SCALAR.search(ast.unparse(a.annotation))
               and not _POINTER_TYPE.search(ast.unparse(a.annotation))}
    deps: dict[str, set[tuple[str, frozenset[str]]]] = {}
    roots: list[tuple[str, frozenset[str]]] = []

    def visit(body: list[ast.stmt], flags: frozenset[str]) -> None:
        for stmt in body:
            if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and stmt.value is not None:
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                names = _guarded_names(stmt.value, options)
                for target in targets:
                    for node in ast.walk(target):
                        if isinstance(node, ast.Name):
                            deps.setdefault(node.id, set()).update(names)
            compound = isinstance(stmt, (ast.If, ast.For, ast.While, ast.With, ast.Try))
            for node in (_header(stmt) if compound else ast.walk(stmt)):
                if isinstance(node, ast.Call):
                    ptr = _store_pointer(node)
                    if ptr is not None:
                        roots.extend((n, flags | g) for n, g in _guarded_names(ptr, options))
            if isinstance(stmt, ast.If):
                taken, other = _branch_flags(stmt.test, options)
                visit(stmt.body, flags | taken)
                visit(stmt.orelse, flags | other)
                continue
            for field in ("body", "orelse", "finalbody"):
                block = getattr(stmt, field, None)
                if isinstance(block, list) and not isinstance(
                    stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
                ):
                    visit(block, flags)
            for handler in getattr(stmt, "handlers", ()):
                visit(handler.body, flags)

    visit(kernel.body, frozenset())
    reached: set[tuple[str, frozenset[str]]] = set()
    frontier = {root for root in roots if not _contradicts(root[1])}
    for _ in range(_MAX_ROUNDS + 1):
        reached |= frontier
        nxt = set()
        for name, flags in frontier:
            for src, guard in deps.get(name, ()):
                state = (src, flags | guard)
                if state not in reached and not _contradicts(state[1]):
                    nxt.add(state)
        if not nxt:
            break
        frontier = nxt
    result: dict[int, list[frozenset[str]]] = {}
    for i, p in enumerate(params):
        if p not in scalars:
            guards = sorted({flags for name, flags in reached if name == p}, key=sorted)
            if guards:
                result[i] = guards
    kernel.__dict__["_gs_stored"] = result
    return result


def _option_test(test: ast.expr, options: set[str]) -> tuple[str, bool] | None:
    """``FLAG`` -> (FLAG, True), ``not FLAG`` -> (FLAG, False) for a launch option."""
    negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
    inner = test.operand if negated else test
    if isinstance(inner, ast.Name) and inner.id in options:
        return inner.id, not negated
    return None


def _option_compare(test: ast.expr, options: set[str]) -> tuple[str, bool] | None:
    """``OP == 1`` -> ("OP==1", True), ``OP != 1`` -> ("OP==1", False): an option compared
    with a literal selects by value, not by truth (``operation == 0`` is on for 0)."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1
            and isinstance(test.ops[0], (ast.Eq, ast.NotEq))):
        return None
    left, right = test.left, test.comparators[0]
    if isinstance(right, ast.Name) and isinstance(left, ast.Constant):
        left, right = right, left
    if isinstance(left, ast.Name) and left.id in options and isinstance(right, ast.Constant) \
            and isinstance(right.value, (int, str)):
        return f"{left.id}=={right.value!r}", isinstance(test.ops[0], ast.Eq)
    return None


def _branch_flags(test: ast.expr, options: set[str]) -> tuple[frozenset[str], frozenset[str]]:
    """Flags for an ``if``'s body and its ``else``: one option (possibly negated) gives both
    branches a known flag; a conjunction of options guards the body only (its ``else`` runs
    when any of them is off, which no single flag says: the ``else`` is taken as unguarded)."""
    simple = _option_test(test, options) or _option_compare(test, options)
    if simple is not None:
        name, positive = simple
        return frozenset({name if positive else "!" + name}), frozenset(
            {"!" + name if positive else name})
    body = frozenset(n.id for n in ast.walk(test) if isinstance(n, ast.Name) and n.id in options)
    return body, frozenset()


def _guarded_names(expr: ast.AST, options: set[str]) -> set[tuple[str, frozenset[str]]]:
    """Names an expression can point into, each with the option flags that select it."""
    if isinstance(expr, ast.IfExp):
        simple = _option_test(expr.test, options)
        if simple is not None:
            name, positive = simple
            on, off = frozenset({name}), frozenset({"!" + name})
            body, other = (on, off) if positive else (off, on)
            return ({(n, g | body) for n, g in _guarded_names(expr.body, options)}
                    | {(n, g | other) for n, g in _guarded_names(expr.orelse, options)})
    return {(n, frozenset()) for n in _names(expr)}


def _contradicts(flags: frozenset[str]) -> bool:
    return any("!" + f in flags for f in flags if not f.startswith("!"))


def _store_pointer(node: ast.Call) -> ast.expr | None:
    """The pointer a ``tl.store``/atomic call writes through (a descriptor's ``.store``)."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else None
    if name not in _STORES:
        return None
    module = dotted(func.value)
    if module and module[-1] in ("tl", "language", "triton"):
        return node.args[0] if node.args else next(
            (k.value for k in node.keywords if k.arg in ("pointer", "ptr")), None)
    return func.value if name == "store" else None


def _header(stmt: ast.stmt):
    """Nodes of a compound statement's own header (its body is visited on its own)."""
    for field in ("test", "iter", "target"):
        part = getattr(stmt, field, None)
        if part is not None:
            yield from ast.walk(part)
    for item in getattr(stmt, "items", ()):
        yield from ast.walk(item.context_expr)


def launched(call: ast.Call) -> ast.expr | None:
    """The kernel expression of a launch ``kernel[grid](...)``, else None."""
    func = call.func
    if isinstance(func, ast.Subscript) and isinstance(func.value, (ast.Name, ast.Attribute)):
        return func.value
    return None


def finder(sym, sym_of: dict):
    """Resolve a launched kernel expression to its ``def`` in the linted modules.

    ``sym`` is the launching module's symbols; ``sym_of`` maps every linted source to its
    symbols (imports such as ``from .kernels import _fwd`` are followed to that module).
    ``find.owner(node)`` gives the symbols of the module a found ``def`` lives in (kept
    here, not on the node: a node -> symbols -> tree -> node cycle would outlive the run).
    """
    owners: dict[int, object] = {}

    def find(head: ast.expr) -> ast.FunctionDef | None:
        parts = dotted(head)
        if not parts:
            return None
        node, owner = _member(sym, parts, modules_of(sym_of), _RESOLVE_DEPTH)
        if node is None:
            return None
        jitted_names(owner.source)
        owners.setdefault(id(node), owner)  # its module, to resolve its calls
        return node

    def external(name: str) -> str | None:
        """The module ``name`` is imported from, when that module is not linted."""
        qual = sym.imports.get(name)
        if qual is None or "." not in qual:
            return None
        module = qual.rpartition(".")[0]
        return None if module_named(modules_of(sym_of), module, sym) else module

    find.owner = lambda node: owners.get(id(node))
    find.learn = lambda node, owner: owners.setdefault(id(node), owner)
    find.external = external
    find.sym = sym
    return find


#: How many imports, re-exports and star imports a name is followed through.
_RESOLVE_DEPTH = 4


def _member(sym, parts: list[str], modules: dict, depth: int):
    """The ``def`` a dotted name ``parts`` means in module ``sym``, and the symbols of the
    module it lives in: a function, or a method of a class (``Fn.__backward`` from inside
    ``Fn``, ``kernel.GELU.backward`` through a package that re-exports ``GELU`` with
    ``from .gelu import *``); (None, None) when it is not in the linted code."""
    if depth < 0:
        return None, None
    name, rest = parts[0], parts[1:]
    node = sym.source.functions.get(name)
    if node is not None:
        return (node, sym) if not rest else (None, None)
    klass = sym.classes.get(name)
    if klass is not None:
        return (_method(klass, rest[0]), sym) if len(rest) == 1 else (None, None)
    for value in module_aliases(sym).get(name, ()):  # `fn = _impl` (on one branch)
        found = _member(sym, [*value, *rest], modules, depth - 1)
        if found[0] is not None:
            return found
    qual = sym.imports.get(name)
    if qual is not None:
        qualparts = qual.split(".") + rest
        for cut in range(len(qualparts) - 1, 0, -1):  # the longest linted module first
            other = module_named(modules, ".".join(qualparts[:cut]), sym)
            if other is not None:
                return _member(other, qualparts[cut:], modules, depth - 1)
        return None, None
    for base in sym.stars:  # `from .gelu import *` in a package __init__
        other = module_named(modules, base, sym)
        if other is not None and other is not sym:
            found = _member(other, parts, modules, depth - 1)
            if found[0] is not None:
                return found
    return None, None


def _method(klass: ast.ClassDef, name: str) -> ast.FunctionDef | None:
    """The ``def`` named ``name`` in a class body (a static or class method called through
    the class; a private ``__name`` is written the same way on both sides inside it)."""
    return next((s for s in klass.body if isinstance(s, ast.FunctionDef) and s.name == name),
                None)


def module_named(modules: dict, name: str, importer):
    """The linted module ``name`` as ``importer`` imports it: by its full name, or a sibling
    imported by its bare name (``from MinkowskiCommon import f`` inside the package
    ``MinkowskiEngine``, whose folder the project puts on ``sys.path``), or one under a
    folder the importer adds to ``sys.path`` itself (``sys.path.append("../pkg")``)."""
    found = modules.get(name)
    if found is None and importer is not None and name:
        package = importer.module if importer.source.is_package else \
            importer.module.rpartition(".")[0]
        if package:
            found = modules.get(f"{package}.{name}")
        if found is None:  # `sys.path.append("../pkg")` then `from mod import f`
            found = module_on_path(modules, name, importer)
    return found


def forget() -> None:
    """Drop the module table of the last run (called when an analysis ends)."""
    _MODULES.clear()
    forget_paths()


_MODULES: dict[int, tuple[int, dict]] = {}


def modules_of(sym_of: dict) -> dict:
    """Module name -> symbols of every linted module (built once per run's ``sym_of``)."""
    entry = _MODULES.get(id(sym_of))
    if entry is None or entry[0] != len(sym_of):
        _MODULES.clear()
        entry = _MODULES[id(sym_of)] = (len(sym_of), {s.module: s for s in sym_of.values()})
    return entry[1]


__all__ = ["finder", "forget", "is_custom_op", "is_kernel", "jitted_names", "launched",
           "module_named", "modules_of", "stored_params"]
