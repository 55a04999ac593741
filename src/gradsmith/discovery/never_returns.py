"""A forward that can never return: a statement every call reaches reads a name defined nowhere (private).

``return output.clone()`` where no statement of forward, of its module or of the project ever
binds ``output`` raises ``NameError`` on every call that gets that far, whatever the inputs; the
statements before it can only raise too. So forward never produces an output, and a row that
skips it (blaming the inputs synthesis invented) hides a crash every user meets (corpus 13:
bandlimited-cnns ``noise_Conv2dFunction2``, ViTALiTy ``FakeWeight`` reading ``prec_sf``, a
parameter of another function of its module). Read from forward's AST and the module's source;
nothing is run, so it answers where no synthesised input gets past forward's first checks.

A statement is *reached* when every call that has not raised gets to it: a direct statement
of forward (or of a ``with`` block over a torch context manager there), after no statement
that can return, and outside ``try``. Of a reached statement only what it evaluates on every
call counts (an ``if``'s test, not its body; the first operand of ``and``/``or``; an
``x if c else y``'s ``c``; a comprehension's first iterable, never a lambda's body).

A name read there is *defined nowhere* when either:

- it is a global lookup (not a parameter, local or closure variable of forward), absent from
  the module's globals and from the builtins, bound by no statement at the module's top level
  (an optional import that failed on this machine is the machine's, not the code's), named by
  no ``global`` statement of the module, the module uses no ``globals()``/``exec``/builtins
  injection, and no project file assigns ``<module>.<name> = ...``; or
- it is a local of forward that is not a parameter and that no statement before it binds (an
  ``UnboundLocalError``: ``x = x + 1`` as forward's first use of ``x``).
"""

from __future__ import annotations

import ast
import builtins
import inspect
import linecache
import re
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gradsmith.discovery.source import function_def

__all__ = ["name_explanation", "never_returns", "reached", "unconditional", "undefined_read"]

#: Module text through which a name can appear at run time without a visible binding.
_DYNAMIC = re.compile(r"\bglobals\s*\(|\bexec\s*\(|__builtins__|\bbuiltins\b|\bvars\s*\(")
#: Context managers from these modules never swallow an exception (torch.no_grad, autocast).
_CONTEXTS = ("torch",)


def never_returns(owner: Any) -> dict | None:
    """Where ``owner``'s forward reads a name defined nowhere on a statement every call
    reaches, or None (see the module's rules).

    Returns:
        ``{"file", "line", "function", "code", "name", "kind"}``: ``kind`` is ``"undefined"``
        (``NameError``) or ``"unbound"`` (``UnboundLocalError``), ``code`` the statement's line.
    """
    forward = inspect.getattr_static(owner, "forward", None) if isinstance(owner, type) else None
    forward = getattr(forward, "__func__", forward)
    code = getattr(forward, "__code__", None)
    if code is None:
        return None
    return undefined_read(code, getattr(forward, "__globals__", {}))


def undefined_read(code: types.CodeType, scope: dict, line: int | None = None) -> dict | None:
    """The first read of a name defined nowhere in ``code`` (a forward) on a reached statement,
    or None; with ``line``, only a read on that line of the file counts."""
    if (found := function_def(code)) is None:
        return None
    tree, start = found
    params = set(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount
                                  + bool(code.co_flags & inspect.CO_VARARGS)
                                  + bool(code.co_flags & inspect.CO_VARKEYWORDS)])
    local = (set(code.co_varnames) | set(code.co_cellvars)) - params
    bound: set[str] = set()
    for stmt, evaluated in reached(tree.body):
        walrus = {n.target.id for e in evaluated for n in unconditional(e)
                  if isinstance(n, ast.NamedExpr)}
        for expr in evaluated:
            for node in unconditional(expr):
                if not (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)):
                    continue
                at = start + node.lineno - 1
                if line is not None and at != line:
                    continue
                kind = None
                if node.id in local and node.id not in bound | walrus:
                    kind = "unbound"
                elif node.id not in local | params | set(code.co_freevars) and \
                        _undefined_global(node.id, scope):
                    kind = "undefined"
                if kind is not None:
                    text = linecache.getline(code.co_filename, at).strip()
                    return {"file": code.co_filename, "line": at, "function": code.co_name,
                            "code": text or ast.unparse(stmt).split("\n", 1)[0],
                            "name": node.id, "kind": kind}
        bound |= _binds(stmt)
    return None


def reached(body: list[ast.stmt]) -> list[tuple[ast.stmt, list[ast.expr]]]:
    """Statements every call that has not raised reaches, each with the expressions it
    evaluates on every call; up to the first that may return, catch or raise on purpose."""
    out: list[tuple[ast.stmt, list[ast.expr]]] = []
    _walk(body, out)
    return out


def _walk(body: list[ast.stmt], out: list) -> bool:
    """Append ``body``'s reached statements to ``out``; False where the walk stopped early."""
    for stmt in body:
        if isinstance(stmt, (ast.Try, ast.Raise)) or type(stmt).__name__ in ("TryStar", "Match"):
            return False
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            out.append((stmt, [item.context_expr for item in stmt.items]))
            if not all(_plain_context(item.context_expr) for item in stmt.items) or \
                    not _walk(stmt.body, out):
                return False
        else:
            out.append((stmt, _evaluated(stmt)))
        if _may_return(stmt):
            return False
    return True


def unconditional(node: ast.AST) -> Iterator[ast.AST]:
    """``node`` and the parts of it evaluated whenever it is."""
    yield node
    if isinstance(node, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return
    if isinstance(node, ast.IfExp):
        yield from unconditional(node.test)
    elif isinstance(node, ast.BoolOp):
        yield from unconditional(node.values[0])
    elif isinstance(node, ast.Compare):
        yield from unconditional(node.left)
        yield from unconditional(node.comparators[0])
    elif isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
        yield from unconditional(node.generators[0].iter)
    else:
        for child in ast.iter_child_nodes(node):
            yield from unconditional(child)


def _evaluated(stmt: ast.stmt) -> list[ast.expr]:
    if isinstance(stmt, (ast.Expr, ast.Return, ast.Assign, ast.AnnAssign)):
        return [stmt.value] if stmt.value is not None else []
    if isinstance(stmt, ast.AugAssign):  # `n += 1` reads n first
        target = stmt.target
        read = ast.Name(target.id, ast.Load(), lineno=target.lineno,
                        col_offset=target.col_offset) if isinstance(target, ast.Name) else target
        return [read, stmt.value]
    if isinstance(stmt, (ast.If, ast.While, ast.Assert)):
        return [stmt.test]
    if isinstance(stmt, (ast.For, ast.AsyncFor)):
        return [stmt.iter]
    return []


def _may_return(stmt: ast.stmt) -> bool:
    """Whether some call may leave forward normally inside ``stmt`` (a return or a yield
    outside nested definitions)."""
    stack: list[ast.AST] = [stmt]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Return, ast.Yield, ast.YieldFrom)):
            return True
        if node is not stmt and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                  ast.ClassDef, ast.Lambda)):
            continue
        stack.extend(ast.iter_child_nodes(node))
    return False


def _plain_context(expr: ast.expr) -> bool:
    """A torch context manager (``torch.no_grad()``): it never swallows an exception."""
    node = expr.func if isinstance(expr, ast.Call) else expr
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name) and node.id in _CONTEXTS


def _binds(stmt: ast.stmt) -> set[str]:
    """Names ``stmt`` binds in forward's scope (at any depth outside nested definitions)."""
    out: set[str] = set()
    stack: list[ast.AST] = [stmt]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            out.add(node.id)
        elif isinstance(node, ast.alias):
            out.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
            continue
        elif isinstance(node, ast.ExceptHandler) and node.name:
            out.add(node.name)
        stack.extend(ast.iter_child_nodes(node))
    return out


def _undefined_global(name: str, scope: dict) -> bool:
    if name in scope or hasattr(builtins, name) or name in ("__class__",):
        return False
    file = scope.get("__file__")
    try:
        text = Path(file).read_text(errors="replace") if file else ""
        tree = ast.parse(text)
    except (OSError, SyntaxError, ValueError):
        return False
    if _DYNAMIC.search(text):
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Global) and name in node.names:
            return False  # a function of the module may bind it at run time
    if any(name in _binds(stmt) for stmt in tree.body):
        return False  # bound under a condition this machine did not meet (an optional import)
    return not _set_elsewhere(file, scope.get("__name__", ""), name)


def _set_elsewhere(file: str, module: str, name: str) -> bool:
    """Whether a project file assigns ``<module>.<name> = ...`` (or could not be read)."""
    from gradsmith.discovery.module_settings import importable, set_at

    try:
        dotted, top = importable(file, module)
        return bool(set_at(top, dotted, name))
    except Exception:  # noqa: BLE001 - unreadable: not proven
        return True


def name_explanation(found: dict) -> tuple[str, str]:
    """``(cause, fix)`` of a read of a name defined nowhere."""
    name = found["name"]
    if found["kind"] == "unbound":
        return (f"forward reads its local `{name}` before any statement binds it, on a line "
                "every call reaches (the statements before it can only raise): no input can "
                "make this Function return",
                f"assign `{name}` before this line, or read the argument it was meant to be")
    return (f"`{name}` is not an argument or a local of forward, not a global of its module "
            "(no statement there binds it, no project file sets it) and not a builtin, and "
            "every call that gets past the statements before this line reaches it: no input "
            "can make this Function return",
            f"define `{name}`: pass it to forward as an argument, compute it before this line, "
            "or use the value it was meant to be (a leftover from code this was copied from)")
