"""``gradsmith lint``: a static analyzer for ``torch.autograd.Function`` mistakes.

Detection uses :mod:`ast` only: linted code is never imported or executed. Functions are
found by resolving imports and base classes across the linted modules; every rule lives in
:mod:`gradsmith.linter.rules` and registers itself in :data:`RULES`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from gradsmith._errors import GradsmithError
from gradsmith.linter import _run
from gradsmith.linter._engine import RawFile
from gradsmith.linter._finding import Edit, LintFinding, Severity
from gradsmith.linter._registry import RULES, Rule

__all__ = ["RULES", "Edit", "LintFinding", "Rule", "Severity", "fix", "lint"]

PathLike = str | os.PathLike


def _targets(target, source: str | None, filename: str) -> tuple[list[str], list[RawFile]]:
    if source is None and isinstance(target, str) and "\n" in target:
        source, target = target, None
    if source is not None:
        if target is not None:
            raise GradsmithError(
                "lint: got both paths and source=; pass one of them (paths to lint files, "
                "source= to lint a string)"
            )
        return [], [RawFile(filename, _source_bytes(source), "", False, True)]
    if target is None:
        raise GradsmithError("lint: nothing to lint; pass paths or source='...'")
    paths = [os.fspath(target)] if isinstance(target, (str, os.PathLike)) else [
        os.fspath(p) for p in target
    ]
    return paths, []


def _source_bytes(source: str) -> bytes:
    """``source`` as the bytes of a file: in the encoding its PEP 263 line names, so that
    decoding them (and a fix written back) gives ``source`` again, not mojibake."""
    from gradsmith.linter._source import encode

    data = source.encode("utf-8")
    try:
        return encode(source, data)
    except (SyntaxError, LookupError, UnicodeEncodeError):  # bad cookie: reported as GS002
        return data


def lint(
    target: PathLike | Iterable[PathLike] | None = None,
    select: Iterable[str] | str | None = None,
    ignore: Iterable[str] | str | None = None,
    *,
    source: str | None = None,
    filename: str = "<string>",
    config: PathLike | bool | None = None,
) -> list[LintFinding]:
    """Lint files, directories or source text for autograd.Function mistakes.

    Args:
        target: A path, a list of paths, or Python source text (a string with a newline).
        select: Codes or prefixes to report (``["GS1", "GS203"]``); default all.
        ignore: Codes or prefixes to drop.
        source: Source text to lint (alternative to ``target``).
        filename: Path shown for ``source``.
        config: pyproject.toml to read ``[tool.gradsmith.lint]`` from; None finds the
            nearest one above the first path; False ignores configuration.

    Returns:
        Findings sorted by path, line and column.

    Raises:
        GradsmithError: unknown codes, missing paths or an invalid configuration.

    Example:
        >>> code = '''
        ... import torch
        ... class Double(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x):
        ...         return x * 2
        ...     @staticmethod
        ...     def backward(ctx, grad_output):
        ...         grad_output *= 2
        ...         return grad_output
        ... '''
        >>> [(f.line, f.code, f.severity) for f in lint(source=code)]
        [(9, 'GS102', 'warning')]
    """
    paths, raws = _targets(target, source, filename)
    opts = _run.options(paths, select, ignore, False if raws and config is None else config)
    return _run.run(raws or _run.gather(paths, opts), opts)


def fix(
    target: PathLike | Iterable[PathLike] | None = None,
    select: Iterable[str] | str | None = None,
    ignore: Iterable[str] | str | None = None,
    *,
    source: str | None = None,
    filename: str = "<string>",
    config: PathLike | bool | None = None,
    write: bool = False,
) -> _run.FixResult:
    """Apply the safe fixes; returns new texts, unified diffs and the remaining findings.

    Files are only written when ``write=True``: each is replaced whole, in its own encoding,
    BOM and line endings, and only if it still holds what was read. Arguments are as for
    :func:`lint`.

    Raises:
        GradsmithError: as :func:`lint`, and when a file could not be written (it is then
            left as it was; the others are written).

    Example:
        >>> code = "import torch\\nclass F(torch.autograd.Function):\\n" \\
        ...        "    @staticmethod\\n    def forward(ctx, x):\\n        return x\\n" \\
        ...        "    @staticmethod\\n    def backward(ctx, g):\\n" \\
        ...        "        (x,) = ctx.saved_variables\\n        return g\\n"
        >>> "ctx.saved_tensors" in fix(source=code).texts["<string>"]
        True
    """
    paths, raws = _targets(target, source, filename)
    opts = _run.options(paths, select, ignore, False if raws and config is None else config)
    raws = raws or _run.gather(paths, opts)
    result = _run.fix(raws, opts)
    if write and paths:
        failed = result.write()
        if failed:
            raise GradsmithError("lint: fixes not written to " + "; ".join(
                f"{path}: {reason}" for path, reason in failed.items()))
    return result
