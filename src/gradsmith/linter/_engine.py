"""Running the rules: read and parse files, discover Functions, call checkers, filter."""

from __future__ import annotations

import ast
import gc
import os
import re
import stat
import traceback
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from gradsmith import _selection
from gradsmith.linter import _kernels, _project
from gradsmith.linter import rules as _rules  # noqa: F401  (registers every rule)
from gradsmith.linter._discovery import Index
from gradsmith.linter._facts import Facts
from gradsmith.linter._finding import Edit, LintFinding
from gradsmith.linter._passed import handed_modules
from gradsmith.linter._prune import prune
from gradsmith.linter._registry import CHECKERS, RULES
from gradsmith.linter._source import SourceError, SourceFile, decode, module_name, parse
from gradsmith.linter._stack import deep
from gradsmith.linter._symbols import ModuleSymbols, dotted

_SKIP_DIRS = {".git", ".hg", ".svn", "__pycache__", ".venv", "venv", ".tox", ".nox",
              "node_modules", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".eggs"}
#: Above this many bytes of walked files, only files that can involve a Function are parsed.
LARGE_TREE_BYTES = 4_000_000
_BASES = re.compile(rb"class\s+\w+\s*\(([^)]*)\)")
_ALIAS = re.compile(rb"\bFunction\s+as\s+(\w+)")
_WORD = re.compile(rb"\w+")
_CALLED = re.compile(rb"\.\s*(?:apply|forward|backward)\s*\(")
_TAIL_WORD = re.compile(rb"(\w+)\s*$")
#: Text of a module that runs code autograd cannot see into: a Triton kernel, a C++
#: extension build, ctypes, a `torch.library.custom_op`, a registrar handed the module at
#: import time (see _registered).
_KERNEL_SIGN = re.compile(rb"triton\.jit|[\[@]triton\.autotune|cpp_extension|^import ctypes"
                          rb"|\bjiterator\b"
                          rb"|\bcustom_op\("
                          rb"|^\w[\w.]*\([^\n]*\b(?:__name__|globals\(\))\)\s*$", re.M)


@dataclass
class ModuleTarget:
    """What module-scope checkers see: one parsed file plus the whole index."""

    source: SourceFile
    sym: ModuleSymbols
    index: Index


@dataclass
class RawFile:
    path: str
    data: bytes
    module: str
    is_package: bool
    explicit: bool
    error: str | None = None


def iter_files(paths: Iterable[str | os.PathLike], exclude: Iterable[str] = ()) -> list[RawFile]:
    """Python files under ``paths`` (directories are walked, hidden/cache dirs skipped)."""
    patterns = [re.compile(_glob_to_regex(p)) for p in exclude]
    out: list[RawFile] = []

    def excluded(path: Path) -> bool:
        text = path.as_posix()
        return any(p.search(text) for p in patterns)

    for raw in paths:
        root = Path(raw)
        if root.is_dir():
            for folder, dirs, files in os.walk(root):
                dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
                for name in sorted(files):
                    path = Path(folder, name)
                    if name.endswith(".py") and not excluded(path):
                        out.append(_raw(path, explicit=False))
        else:
            out.append(_raw(root, explicit=True))
    return out


def _glob_to_regex(glob: str) -> str:
    parts = re.escape(glob).replace(r"\*\*", ".*").replace(r"\*", "[^/]*").replace(r"\?", ".")
    return rf"(^|/){parts}(/|$)"


def _raw(path: Path, explicit: bool) -> RawFile:
    try:
        if not stat.S_ISREG(path.stat().st_mode):  # a FIFO would block, /dev/zero never end
            return RawFile(str(path), b"", "", False, explicit,
                           "cannot read it: not a regular file (a FIFO, socket or device)")
        data = path.read_bytes()
    except OSError as exc:
        return RawFile(str(path), b"", "", False, True, f"cannot read it: {exc.strerror or exc}")
    module, is_package = module_name(path)
    return RawFile(str(path), data, module, is_package, explicit)


class Reporter:
    """Collects findings for one run; the ``report`` callable handed to checkers."""

    def __init__(self) -> None:
        self.findings: list[LintFinding] = []

    def __call__(self, code, source: SourceFile | str, where, detail: str = "",
                 fix: tuple[Edit, ...] = ()) -> None:
        rule = RULES[code]
        if isinstance(where, tuple):
            line, col = where
        elif isinstance(source, SourceFile):
            line, col = source.start(where)
        else:
            line, col = where.lineno, where.col_offset
        path = source.path if isinstance(source, SourceFile) else source
        self.findings.append(
            LintFinding(path, line, col + 1, code, rule.severity, rule.message(detail), tuple(fix))
        )


def _prefilter(raws: list[RawFile]) -> tuple[list[RawFile], list[RawFile]]:
    """Split walked files into (to parse now, maybe later) for large trees."""
    walked = [r for r in raws if not r.explicit]
    if sum(len(r.data) for r in walked) <= LARGE_TREE_BYTES:
        return raws, []
    now, later = [], []
    for raw in raws:
        if raw.explicit or raw.error:
            now.append(raw)
            continue
        names = {b"Function", *_ALIAS.findall(raw.data)}
        (now if _words(raw, "bases") & names else later).append(raw)
    return now, later


def _words(raw: RawFile, kind: str) -> set[bytes]:
    """Identifiers in class bases (``kind="bases"``) or before ``.apply(``/``.forward(``."""
    cache = raw.__dict__.setdefault("_words", {})
    if kind not in cache:
        if kind == "bases":
            bases = _BASES.findall(raw.data) if b"class" in raw.data else []
            cache[kind] = {w for b in bases for w in _WORD.findall(b)}
        else:
            found = set()
            for match in _CALLED.finditer(raw.data):
                word = _TAIL_WORD.search(raw.data, max(0, match.start() - 80), match.start())
                if word:
                    found.add(word.group(1))
            cache[kind] = found
    return cache[kind]


def _parse(raw: RawFile, reporter: Reporter) -> SourceFile | None:
    if raw.error:
        reporter("GS002", raw.path, (1, 0), raw.error)
        return None
    try:
        return parse(decode(raw.data), raw.path, raw.module, raw.is_package)
    except SourceError as err:
        reporter(err.code, raw.path, (err.line, max(err.col - 1, 0)), err.detail)
        return None


def analyse(raws: list[RawFile]) -> list[LintFinding]:
    """Run every checker over the files; returns unfiltered findings.

    The cyclic garbage collector is paused meanwhile: its full collections traverse every
    live AST node, which made lint time grow quadratically with the size of the code. A
    rule that runs out of stack on deeply nested valid code is run again with a deep one
    (see ``_guarded`` and ``_stack``).
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _analyse(raws)
    finally:
        _kernels.forget()
        _project.forget()
        if enabled:
            gc.enable()


def _analyse(raws: list[RawFile]) -> list[LintFinding]:
    reporter = Reporter()
    _project.note_setups(r.path for r in raws if not r.error)
    now, later = _prefilter(raws)
    sources = [s for s in (_parse(r, reporter) for r in now) if s is not None]
    index = Index(sources)
    functions = index.discover()
    while later:  # large trees: pull in files subclassing or applying a discovered Function
        names = {fc.name.encode() for fc in functions}
        pulled = [r for r in later if (_words(r, "bases") | _words(r, "calls")) & names]
        if not pulled:
            break
        later = [r for r in later if r not in pulled]
        sources += [s for s in (_parse(r, reporter) for r in pulled) if s is not None]
        index = Index(sources)
        functions = index.discover()
    helpers = _helper_modules(later, functions, index) if later else []
    if helpers:  # large trees: where backward's helpers live (see _helper_modules)
        sources += [s for s in (_parse(r, reporter) for r in helpers) if s is not None]
        index = Index(sources)
        functions = index.discover()
    sym_of = {id(src): index.by_source[id(src)] for src in sources}
    index.names = {fc.name for fc in functions}
    for fc in functions:
        facts = Facts(fc, sym_of)
        start = len(reporter.findings)
        for rule, check in CHECKERS["function"]:
            _guarded(check, facts, reporter, rule.code, fc.source, fc.node)
        reporter.findings[start:] = prune(facts, reporter.findings[start:])
    for src in sources:
        target = ModuleTarget(src, sym_of[id(src)], index)
        for rule, check in CHECKERS["module"]:
            _guarded(check, target, reporter, rule.code, src, (1, 0))
    return reporter.findings


def _helper_modules(later: list[RawFile], functions, index: Index) -> list[RawFile]:
    """Files left unparsed by the large-tree pre-filter that a discovered Function's
    backward calls into: the module a called name is imported from (``from .._ops import
    _segment_mm``, or ``kernels.ops`` for ``kernels.ops.group(...)`` after ``from . import
    kernels``) when its text shows a way to run code autograd cannot see into (Triton,
    a C++ extension build, ctypes, a registrar given the module at import time), so that
    GS215 can follow a backward's helper to the kernel it runs; and the module of a helper
    a top-level statement of backward calls for its effect (a log-and-assert that always
    raises, which GS109 reads); and the modules of the functions the calls of ``Fn.apply``
    hand forward when backward calls through ctx (``ctx.act_bwd(...)``). One level: a
    helper's own imports are not pulled in (that would parse most of a large package)."""
    by_module = {r.module: r for r in later if r.module}
    wanted: set[str] = set()
    effects: set[str] = set()  # called for effect (`check(False, log, "...")`): see GS109
    for fc in functions:
        for name in ("backward", "vjp"):
            method = fc.methods.get(name)
            sym = index.by_source.get(id(method.source)) if method is not None else None
            if sym is None:
                continue
            for node in ast.walk(method.node):
                parts = dotted(node.func) if isinstance(node, ast.Call) else None
                wanted.update(_called_modules(sym, parts) if parts else ())
            for stmt in method.node.body:
                call = stmt.value if isinstance(stmt, ast.Expr) else None
                parts = dotted(call.func) if isinstance(call, ast.Call) else None
                if parts and len(parts) == 1:  # a bare imported name: its module
                    effects.update(_called_modules(sym, parts))
        # functions the calls of `Fn.apply` hand forward for backward's `ctx.fn(...)`
        wanted.update(handed_modules(fc, index.by_source.values(), _called_modules))
    return [by_module[m] for m in sorted(wanted | effects) if m in by_module and (
        m in effects or _KERNEL_SIGN.search(by_module[m].data))]


def _called_modules(sym: ModuleSymbols, parts: list[str]) -> list[str]:
    """Modules a call of the dotted name ``parts`` may run a function of: the module a bare
    name is imported from (``from .._ops import f`` then ``f(...)``), and for an imported
    module or package every module its attributes spell (``from . import kernels`` then
    ``kernels.ops.group(...)``: ``kernels.ops``, then ``kernels``)."""
    target = sym.imports.get(parts[0])
    if not target:
        return []
    if len(parts) == 1:
        return [target.rpartition(".")[0]]
    return [".".join([target, *parts[1:cut]]) for cut in range(len(parts) - 1, 0, -1)]


def _guarded(check, target, reporter: Reporter, code: str, source, where) -> None:
    start = len(reporter.findings)
    try:
        try:
            check(target, reporter)
        except RecursionError:  # valid code nested deeper than the default stack allows
            del reporter.findings[start:]
            deep(check, target, reporter)
    except Exception as exc:  # a rule bug must never take the run down
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        reporter(
            "GS003", source, where,
            f"checker of {code} crashed with {type(exc).__name__}: {exc} "
            f"({Path(frame.filename).name}:{frame.lineno})",
        )


_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]*(?:[\s,]+[A-Z]+[0-9]*)*))?", re.I)


def suppressed(finding: LintFinding, lines: list[str]) -> bool:
    """Whether ``# noqa`` or ``# noqa: GS101`` on the finding's line silences it."""
    if not 1 <= finding.line <= len(lines):
        return False
    match = _NOQA.search(lines[finding.line - 1])
    if match is None:
        return False
    codes = match.group("codes")
    if not codes:
        return True
    return any(finding.code.startswith(c.upper()) for c in re.split(r"[\s,]+", codes) if c)


def selected(code: str, select: Iterable[str] | None, ignore: Iterable[str] | None) -> bool:
    """``--select``/``--ignore`` by code or prefix; the longer matching prefix wins."""
    return _selection.selected(code, select, ignore, everything="GS")


