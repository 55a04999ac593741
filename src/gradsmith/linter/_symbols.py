"""What names mean in a module: imports (also relative and local ones), classes, aliases."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from gradsmith.linter._source import SourceFile


@dataclass
class ModuleSymbols:
    """Bindings of one module, enough to resolve a base-class expression to a qualified name.

    Imports anywhere in the file count (Functions are often defined inside test functions
    that import ``Function`` locally); module-level bindings win over local ones.
    """

    source: SourceFile
    imports: dict[str, str] = field(default_factory=dict)
    stars: list[str] = field(default_factory=list)
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    aliases: dict[str, ast.expr] = field(default_factory=dict)
    all_classes: list[ast.ClassDef] = field(default_factory=list)

    @property
    def module(self) -> str:
        return self.source.module


def _absolute(module: str, is_package: bool, level: int, name: str | None) -> str:
    """Resolve ``from <level dots><name> import ...`` inside ``module``."""
    if level == 0:
        return name or ""
    parts = module.split(".") if module else []
    if not is_package:
        parts = parts[:-1]
    if level > 1:
        parts = parts[: len(parts) - (level - 1)] if level - 1 <= len(parts) else []
    if name:
        parts.append(name)
    return ".".join(parts)


def _bind_import(sym: ModuleSymbols, node: ast.stmt, top: bool) -> None:
    def put(local: str, target: str) -> None:
        if top or local not in sym.imports:
            sym.imports[local] = target

    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.asname:
                put(alias.asname, alias.name)
            else:
                head = alias.name.split(".")[0]
                put(head, head)
    elif isinstance(node, ast.ImportFrom):
        base = _absolute(sym.module, sym.source.is_package, node.level, node.module)
        for alias in node.names:
            if alias.name == "*":
                sym.stars.append(base)
            else:
                put(alias.asname or alias.name, f"{base}.{alias.name}" if base else alias.name)


def collect(source: SourceFile) -> ModuleSymbols:
    """Build the :class:`ModuleSymbols` of ``source``.

    Example:
        >>> from gradsmith.linter._source import parse
        >>> src = parse("from torch.autograd import Function as F\\nclass A(F): pass", "m.py", "m")
        >>> sym = collect(src)
        >>> sym.imports["F"], list(sym.classes)
        ('torch.autograd.Function', ['A'])
    """
    sym = ModuleSymbols(source)
    top_level = set(map(id, source.tree.body))
    for node in source.tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            _bind_import(sym, node, True)
        elif isinstance(node, ast.ClassDef):
            sym.classes[node.name] = node
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name) and isinstance(node.value, (ast.Name, ast.Attribute)):
                sym.aliases[target.id] = node.value
    for node in statements(source.tree.body):
        if isinstance(node, ast.ClassDef):
            sym.all_classes.append(node)
            sym.classes.setdefault(node.name, node)
        elif isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in top_level:
            _bind_import(sym, node, False)
    return sym


def import_time(body: list[ast.stmt], blocks: tuple[type, ...] = (ast.If, ast.Try)):
    """Statements run at import time: the module body and its ``blocks`` (if/try; callers that
    read ``with`` blocks too pass them), not the bodies of functions or classes."""
    stack = list(reversed(body))
    while stack:
        stmt = stack.pop()
        yield stmt
        if isinstance(stmt, blocks):
            for block in (stmt.body, getattr(stmt, "orelse", []), getattr(stmt, "finalbody", []),
                          *[h.body for h in getattr(stmt, "handlers", [])]):
                stack.extend(reversed(block))


def statements(body: list[ast.stmt]):
    """Every statement in ``body`` and its nested blocks (much cheaper than ``ast.walk``)."""
    stack = list(reversed(body))
    while stack:
        stmt = stack.pop()
        yield stmt
        for name in ("body", "orelse", "finalbody"):
            block = getattr(stmt, name, None)
            if isinstance(block, list):
                stack.extend(reversed(block))
        for handler in getattr(stmt, "handlers", ()):
            stack.extend(reversed(handler.body))
        for case in getattr(stmt, "cases", ()):
            stack.extend(reversed(case.body))


def dotted(expr: ast.expr) -> list[str] | None:
    """``a.b.c`` as ``["a", "b", "c"]``; None for anything that is not a dotted name."""
    parts: list[str] = []
    while isinstance(expr, ast.Attribute):
        parts.append(expr.attr)
        expr = expr.value
    if not isinstance(expr, ast.Name):
        return None
    parts.append(expr.id)
    return parts[::-1]


def module_aliases(sym) -> dict[str, list[list[str]]]:
    """Names bound at import time to another name (``bwd = _bwd_impl``, also on one side of
    an ``if``/``try`` at module level): name -> the dotted names it may hold."""
    source = sym.source
    found = source.__dict__.get("_gs_module_aliases")
    if found is None:
        found = {}
        stack = list(reversed(source.tree.body))
        while stack:  # handlers before else: the first alias found is the one tried first
            stmt = stack.pop()
            if isinstance(stmt, (ast.If, ast.Try)):
                stack.extend(reversed(stmt.body + [s for h in getattr(stmt, "handlers", ())
                                                   for s in h.body]
                                      + stmt.orelse + getattr(stmt, "finalbody", [])))
            elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(
                    stmt.targets[0], ast.Name):
                parts = dotted(stmt.value)
                if parts and parts[0] != stmt.targets[0].id:
                    found.setdefault(stmt.targets[0].id, []).append(parts)
        source.__dict__["_gs_module_aliases"] = found
    return found
