"""Finding ``torch.autograd.Function`` subclasses by resolving imports and base classes.

Classes are recognised by what their bases *resolve to* (through ``import ... as``, module
aliases, re-exports and base classes in other linted modules), never by their name.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from gradsmith.linter._source import SourceFile
from gradsmith.linter._symbols import ModuleSymbols, collect, dotted

#: The framework classes themselves: subclasses of these are user Functions.
ROOTS = frozenset(
    {
        "torch.autograd.Function",
        "torch.autograd.function.Function",
        "torch.autograd.function.InplaceFunction",
        "torch.autograd.function.NestedIOFunction",
        "torch.autograd.function._SingleLevelFunction",
    }
)
#: Methods whose first parameter is ctx (forward only without setup_context).
METHODS = ("forward", "backward", "setup_context", "jvp", "vjp", "vmap")
_MAX_DEPTH = 12


@dataclass
class Method:
    """A Function method as written (possibly inherited from another linted class)."""

    name: str
    node: ast.FunctionDef | ast.AsyncFunctionDef
    source: SourceFile
    decorators: set[str]

    @property
    def static(self) -> bool:
        return "staticmethod" in self.decorators

    @property
    def classmethod(self) -> bool:
        """``@classmethod`` (PyTorch binds ``cls``; ctx is the next parameter)."""
        return "classmethod" in self.decorators

    @property
    def params(self) -> list[str]:
        """Positional parameter names, in order (``cls`` of a classmethod left out)."""
        args = self.node.args
        names = [a.arg for a in (*args.posonlyargs, *args.args)]
        shifted = self.classmethod or (  # `def forward(self, ctx, x)`: missing @staticmethod
            not self.static and len(names) > 1 and names[0] in ("self", "cls")
            and names[1] in ("ctx", "context"))
        return names[1:] if shifted else names

    @property
    def ndefaults(self) -> int:
        return min(len(self.node.args.defaults), len(self.params))

    @property
    def vararg(self) -> bool:
        return self.node.args.vararg is not None


@dataclass
class FunctionClass:
    """A discovered ``autograd.Function`` subclass.

    Attributes:
        methods: Resolved forward/backward/... through the linted bases; ``None`` marks a
            method that exists but cannot be analysed (assigned, not defined with ``def``).
        own: Names of the methods defined in this class's body.
        unknown_base: Some base could not be resolved, so inherited methods may be missing.
    """

    name: str
    node: ast.ClassDef
    source: SourceFile
    methods: dict[str, Method | None] = field(default_factory=dict)
    own: set[str] = field(default_factory=set)
    unknown_base: bool = False

    @property
    def setup_style(self) -> bool:
        """Whether forward is ctx-free because a setup_context is defined."""
        return "setup_context" in self.methods

    def inputs(self) -> tuple[list[str], int, bool] | None:
        """Forward's input names, how many have defaults, whether it takes ``*args``."""
        fwd = self.methods.get("forward")
        if fwd is None:
            return None
        params = fwd.params if self.setup_style else fwd.params[1:]
        return params, min(fwd.ndefaults, len(params)), fwd.vararg


def decorator_names(node: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """Last component of each decorator (``torch.autograd.function.once_differentiable``...)."""
    names = set()
    for dec in node.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        parts = dotted(target)
        if parts:
            names.add(parts[-1])
    return names


class Index:
    """All linted modules, with base-class resolution across them."""

    def __init__(self, sources: list[SourceFile]) -> None:
        self.symbols: dict[str, ModuleSymbols] = {}
        self.by_source: dict[int, ModuleSymbols] = {}
        self.ambiguous: set[str] = set()
        for src in sources:
            sym = collect(src)
            self.by_source[id(src)] = sym
            if src.module in self.symbols:  # two linted files claim one module name
                self.ambiguous.add(src.module)
            elif src.module:
                self.symbols[src.module] = sym
        self._verdict: dict[int, bool | None] = {}
        self.functions: dict[int, FunctionClass] = {}

    # -- name resolution -------------------------------------------------------------------
    def qualify(self, sym: ModuleSymbols, expr: ast.expr, depth: int = 0) -> str | None:
        """Qualified name of a dotted expression in module ``sym``, or None."""
        parts = dotted(expr)
        if not parts or depth > _MAX_DEPTH:
            return None
        head, rest = parts[0], parts[1:]
        if head in sym.classes:
            base = f"{sym.module}.{head}" if sym.module else head
        elif head in sym.imports:
            base = sym.imports[head]
        elif head in sym.aliases:
            base = self.qualify(sym, sym.aliases[head], depth + 1)
            if base is None:
                return None
        else:
            base = next((f"{m}.{head}" for m in sym.stars if m.startswith("torch")), None)
            if base is None:
                return None
        return ".".join([base, *rest])

    def lookup(self, qualname: str, depth: int = 0) -> tuple[ModuleSymbols, ast.ClassDef] | str:
        """Find the class a qualified name refers to: ``(module, ClassDef)``, "root" or "?"."""
        if qualname in ROOTS:
            return "root"
        if depth > _MAX_DEPTH:
            return "?"
        parts = qualname.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            name = ".".join(parts[:cut])
            if name in self.ambiguous:
                return "?"
            sym = self.symbols.get(name)
            if sym is None:
                continue
            head, rest = parts[cut], parts[cut + 1 :]
            if not rest and head in sym.classes:
                return sym, sym.classes[head]
            target = sym.imports.get(head)
            if target is None and head in sym.aliases:
                target = self.qualify(sym, sym.aliases[head])
            if target is None or target == qualname:
                return "?"
            return self.lookup(".".join([target, *rest]), depth + 1)
        return "?"

    def resolve_base(self, sym: ModuleSymbols, expr: ast.expr):
        """What a base-class expression is: ``(module, ClassDef)``, "root" or "?"."""
        if isinstance(expr, ast.Name) and expr.id in sym.classes and expr.id not in sym.imports:
            return sym, sym.classes[expr.id]
        qual = self.qualify(sym, expr)
        if qual is None:
            return "?"
        return self.lookup(qual)

    # -- discovery -------------------------------------------------------------------------
    def is_function(self, sym: ModuleSymbols, cls: ast.ClassDef, depth: int = 0) -> bool:
        """Whether ``cls`` derives (through linted modules) from a torch Function root."""
        key = id(cls)
        if key in self._verdict:
            return bool(self._verdict[key])
        if depth > _MAX_DEPTH:
            return False
        self._verdict[key] = None  # cycle guard
        verdict = False
        for base in cls.bases:
            found = self.resolve_base(sym, base)
            if found == "root":
                verdict = True
            elif isinstance(found, tuple) and found[1] is not cls:
                verdict = self.is_function(found[0], found[1], depth + 1)
            if verdict:
                break
        self._verdict[key] = verdict
        return verdict

    def discover(self) -> list[FunctionClass]:
        """All Function subclasses in the linted sources (excluding the torch roots)."""
        found = []
        for sym in self.by_source.values():
            for cls in sym.all_classes:
                qual = f"{sym.module}.{cls.name}" if sym.module else cls.name
                if qual in ROOTS or not self.is_function(sym, cls):
                    continue
                fc = FunctionClass(cls.name, cls, sym.source)
                self._fill_methods(fc, sym, cls, 0)
                fc.own = {m for m in fc.methods if self._defines(cls, m)}
                self.functions[id(cls)] = fc
                found.append(fc)
        return found

    @staticmethod
    def _defines(cls: ast.ClassDef, name: str) -> bool:
        for stmt in cls.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == name:
                return True
            if isinstance(stmt, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == name for t in stmt.targets
            ):
                return True
        return False

    def _fill_methods(self, fc: FunctionClass, sym: ModuleSymbols, cls: ast.ClassDef, depth):
        if depth > _MAX_DEPTH:
            fc.unknown_base = True
            return
        for stmt in cls.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name in METHODS:
                fc.methods.setdefault(
                    stmt.name, Method(stmt.name, stmt, sym.source, decorator_names(stmt))
                )
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                for t in targets:
                    if isinstance(t, ast.Name) and t.id in METHODS:
                        fc.methods.setdefault(t.id, None)
        for base in cls.bases:
            found = self.resolve_base(sym, base)
            if isinstance(found, tuple):
                self._fill_methods(fc, found[0], found[1], depth + 1)
            elif found != "root":
                fc.unknown_base = True
