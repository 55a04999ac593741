"""Applying safe fixes: non-overlapping text edits, verified to parse, re-linted to converge."""

from __future__ import annotations

import ast
import difflib
import warnings

from gradsmith.linter._finding import Edit, LintFinding

MAX_ROUNDS = 5


def _offsets(text: str) -> list[int]:
    starts, pos = [0], 0
    for line in text.splitlines(keepends=True):
        pos += len(line)
        starts.append(pos)
    return starts


def apply_edits(text: str, edits: list[Edit]) -> tuple[str, int]:
    """Apply non-overlapping ``edits`` (later ones that overlap are skipped).

    Returns the new text and how many edits were applied. Edits whose result does not parse
    are dropped.

    Example:
        >>> apply_edits("y = x.data\\n", [Edit((1, 5), (1, 10), ".detach()")])
        ('y = x.detach()\\n', 1)
    """
    starts = _offsets(text)

    def offset(pos: tuple[int, int]) -> int:
        line, col = pos
        return starts[min(line - 1, len(starts) - 1)] + col

    spans = sorted(((offset(e.start), offset(e.end), e.text) for e in edits), key=lambda s: s[:2])
    chosen, last_end = [], -1
    for start, end, new in spans:
        if start >= last_end or (start == end == last_end):
            chosen.append((start, end, new))
            last_end = max(end, last_end)
    result = _splice(text, chosen)
    if _parses(result):
        return result, len(chosen)
    kept: list = []  # fall back to one edit at a time, keeping those that parse
    for span in chosen:
        trial = _splice(text, [*kept, span])
        if _parses(trial):
            kept.append(span)
    return _splice(text, kept), len(kept)


def _splice(text: str, spans) -> str:
    out, pos = [], 0
    for start, end, new in sorted(spans, key=lambda s: s[:2]):
        out.append(text[pos:start])
        out.append(new)
        pos = end
    out.append(text[pos:])
    return "".join(out)


def _parses(text: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    return True


def edits_by_path(findings: list[LintFinding]) -> dict[str, list[Edit]]:
    out: dict[str, list[Edit]] = {}
    for f in findings:
        if f.fix:
            out.setdefault(f.path, []).extend(f.fix)
    return out


def unified_diff(path: str, before: str, after: str) -> str:
    """A unified diff of one file, as `--diff` prints it."""
    return "".join(difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True),
        fromfile=f"a/{path.lstrip('/')}", tofile=f"b/{path.lstrip('/')}",
    ))
