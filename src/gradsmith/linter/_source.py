"""Reading one file: decode, parse, map ``ast`` byte columns to character columns."""

from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
import warnings
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path


class SourceError(Exception):
    """A file that cannot be linted; ``code`` is GS001 (syntax) or GS002 (decode)."""

    def __init__(self, code: str, line: int, col: int, detail: str) -> None:
        super().__init__(detail)
        self.code, self.line, self.col, self.detail = code, line, col, detail


@dataclass
class SourceFile:
    """A parsed Python file.

    Attributes:
        path: Display path.
        module: Dotted module name (``""`` when unknown), used to resolve imports.
        is_package: Whether the file is a package ``__init__``.
        text: Decoded text.
        tree: Its ``ast.Module``.
    """

    path: str
    module: str
    is_package: bool
    text: str
    tree: ast.Module
    lines: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.lines = split_lines(self.text)

    @cached_property
    def _starts(self) -> list[int]:
        return line_starts(self.text)

    @cached_property
    def functions(self) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
        """The module's top-level functions by name, computed once per file."""
        return {s.name: s for s in self.tree.body
                if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}

    def char_col(self, line: int, byte_col: int) -> int:
        """Convert an ``ast`` UTF-8 byte column to a character column (0-based)."""
        if not 1 <= line <= len(self.lines):
            return byte_col
        text = self.lines[line - 1]
        if text.isascii():
            return byte_col
        return len(text.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))

    def start(self, node: ast.AST) -> tuple[int, int]:
        """(line, 0-based char column) where ``node`` starts."""
        return node.lineno, self.char_col(node.lineno, node.col_offset)

    def end(self, node: ast.AST) -> tuple[int, int]:
        """(line, 0-based char column) where ``node`` ends."""
        return node.end_lineno, self.char_col(node.end_lineno, node.end_col_offset)

    def segment(self, node: ast.AST) -> str:
        """The source text of ``node``."""
        try:
            (l1, c1), (l2, c2) = self.start(node), self.end(node)
        except (AttributeError, TypeError):
            return ""
        return self.text[offset(self._starts, (l1, c1)) : offset(self._starts, (l2, c2))]


_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def split_lines(text: str, keepends: bool = False) -> list[str]:
    """Split ``text`` into lines as Python numbers them: only ``\\n``, ``\\r\\n`` and ``\\r`` end one.

    ``str.splitlines()`` also breaks at form feeds, ``\\x1c``-``\\x1e``, ``\\x85``, U+2028 and
    U+2029, which Python keeps inside a line (in a comment, a string or as whitespace): every
    (line, column) from ``ast`` must be looked up with this function instead.

    Example:
        >>> split_lines("a\\x0cb\\u2028c\\r\\nd\\re\\n")
        ['a\\x0cb\\u2028c', 'd', 'e']
        >>> "a\\x0cb".splitlines()
        ['a', 'b']
    """
    lines = _LINE.findall(text)
    return lines if keepends else [line.rstrip("\r\n") for line in lines]


def line_starts(text: str) -> list[int]:
    """Offset in ``text`` of each line's first character (Python's numbering), plus the end."""
    starts, pos = [0], 0
    for line in split_lines(text, keepends=True):
        pos += len(line)
        starts.append(pos)
    return starts


def offset(starts: list[int], pos: tuple[int, int]) -> int:
    """Offset of (1-based line, 0-based character column), given :func:`line_starts`."""
    line, col = pos
    return starts[min(max(line, 1) - 1, len(starts) - 1)] + col


def newline_of(text: str) -> str:
    """The line ending a new line in ``text`` should use: its first one (``\\n`` if none)."""
    match = re.search(r"\r\n|\r|\n", text)
    return match.group() if match else "\n"


def decode(data: bytes) -> str:
    """Decode Python source bytes the way the interpreter does (PEP 263 cookie, BOM).

    Raises:
        SourceError: GS002 when the bytes cannot be decoded.
    """
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        text = data.decode(encoding)
    except (SyntaxError, UnicodeDecodeError, LookupError) as exc:
        raise SourceError("GS002", 1, 1, f"cannot decode the file: {exc}") from None
    return text[1:] if text.startswith("\ufeff") else text


def encode(text: str, like: bytes) -> bytes:
    """Encode ``text`` the way the source bytes ``like`` are: its PEP 263 encoding and BOM.

    Raises:
        UnicodeEncodeError: ``text`` has a character that encoding cannot hold.

    Example:
        >>> encode("# -*- coding: latin-1 -*-\\ns = 'é'\\n", b"# -*- coding: latin-1 -*-\\n")[-3:]
        b"\\xe9'\\n"
    """
    encoding, _ = tokenize.detect_encoding(io.BytesIO(like).readline)
    return text.encode(encoding)  # "utf-8-sig" (a BOM was there) writes the BOM back


def parse(text: str, path: str, module: str = "", is_package: bool = False) -> SourceFile:
    """Parse ``text``; syntax errors become :class:`SourceError` GS001."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences etc. are not ours to report
            tree = ast.parse(text, filename=path)
    except SyntaxError as exc:
        line = exc.lineno or 1
        col = exc.offset or 1
        if (newer := newer_syntax(text, exc)) is not None:
            raise SourceError("GS004", line, col, newer) from None
        raise SourceError("GS001", line, col, f"{exc.msg}") from None
    except (ValueError, RecursionError, MemoryError) as exc:  # null bytes, absurd nesting
        raise SourceError("GS001", 1, 1, f"cannot parse the file: {exc}") from None
    return SourceFile(path, module, is_package, text, tree)


#: Statements of a newer Python than this one parses: (version, pattern of the line, what).
#: `[T]`, `[T: int]`, `[*Ts, ...]`, or `[` ending the line: a type parameter list
_PARAMS = r"\[\s*(?:$|\*{0,2}\w+\s*[\],:=])"
#: An f-string's opening quote (`f"`, `rf'`, `F"""`)
_FSTRING = re.compile(r"(?<![\w])(?:[rR]?[fF]|[fF][rR])[\"']")
_NEWER = (
    ((3, 12), re.compile(r"\s*(?:async\s+)?def\s+\w+\s*" + _PARAMS), "type parameters"),
    ((3, 12), re.compile(r"\s*class\s+\w+\s*" + _PARAMS), "type parameters"),
    ((3, 12), re.compile(r"\s*type\s+\w+\s*(?:=|" + _PARAMS + ")"), "a type statement"),
    ((3, 14), re.compile(r"\s*except\s+[\w.]+\s*,\s*[\w.]+\s*:"), "`except A, B:`"),
)


def newer_syntax(text: str, exc: SyntaxError) -> str | None:
    """What a syntax error is when its line is valid in a newer Python (PEP 695 type
    parameters and aliases, PEP 758 excepts, PEP 701 f-strings) than the one running
    gradsmith, else None: such a file is valid for its project, just not parseable here.
    """
    lines = text.splitlines()
    where = lines[exc.lineno - 1] if exc.lineno and exc.lineno <= len(lines) else ""
    here = sys.version_info[:2]
    for version, pattern, what in _NEWER:
        if here < version and pattern.match(where):
            return _newer(version, what)
    if here < (3, 12) and ("f-string" in (exc.msg or "") or _FSTRING.search(where)):
        return _newer((3, 12), "a PEP 701 f-string")
    return None


def _newer(version: tuple[int, int], what: str) -> str:
    v, here = ".".join(map(str, version)), ".".join(map(str, sys.version_info[:2]))
    return f"Python {v} syntax ({what}) under Python {here}: run gradsmith under {v}+"


def module_name(path: Path) -> tuple[str, bool]:
    """Dotted module name of ``path`` found by walking up through ``__init__.py`` packages.

    Example:
        >>> module_name(Path("/nonexistent/x/mod.py"))
        ('mod', False)
    """
    path = path.resolve()
    is_package = path.name == "__init__.py"
    prefix = _package_of(str(path.parent))
    name = prefix if is_package else ".".join(p for p in (prefix, path.stem) if p)
    return name, is_package


@lru_cache(maxsize=4096)
def _package_of(folder: str) -> str:
    """Dotted package name of ``folder`` ("" when it is not a package). A folder without
    ``__init__.py`` inside a package is a namespace package of it (``coat/activation/
    deepseek/`` under ``coat/activation/__init__.py`` is ``coat.activation.deepseek``, and
    its ``from ..real_quantization import f`` reaches the sibling package)."""
    here = Path(folder)
    parent = _package_of(str(here.parent)) if here.parent != here else ""
    if not (here / "__init__.py").is_file():
        return f"{parent}.{here.name}" if parent else ""
    return f"{parent}.{here.name}" if parent else here.name
