"""Applying safe fixes: non-overlapping text edits, verified to parse, re-linted to converge.

Positions are (line, column) as Python numbers them (:func:`split_lines`), an inserted line
ends like the file's lines, and files are replaced whole (:func:`write_file`), never edited in
place: a failed write leaves the original as it was.
"""

from __future__ import annotations

import ast
import difflib
import errno
import os
import re
import stat
import tempfile
import warnings

from gradsmith.linter._finding import Edit, LintFinding
from gradsmith.linter._source import line_starts, newline_of, offset, split_lines

MAX_ROUNDS = 5
_BARE_LF = re.compile(r"(?<!\r)\n")


def apply_edits(text: str, edits: list[Edit]) -> tuple[str, int]:
    """Apply non-overlapping ``edits`` (later ones that overlap are skipped).

    Returns the new text and how many edits were applied. Edits whose result does not parse
    are dropped.

    Example:
        >>> apply_edits("y = x.data\\n", [Edit((1, 5), (1, 10), ".detach()")])
        ('y = x.detach()\\n', 1)
    """
    starts, newline = line_starts(text), newline_of(text)

    def new_text(edit: Edit) -> str:  # a line a rule inserts ends like the file's own lines
        return edit.text if newline == "\n" else _BARE_LF.sub(newline, edit.text)

    spans = sorted(((offset(starts, e.start), offset(starts, e.end), new_text(e)) for e in edits),
                   key=lambda s: s[:2])
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
        split_lines(before, keepends=True), split_lines(after, keepends=True),
        fromfile=f"a/{path.lstrip('/')}", tofile=f"b/{path.lstrip('/')}",
    ))


class FileChangedError(OSError):
    """The file on disk is no longer the one that was read and fixed."""


def write_file(path: str, data: bytes, expected: bytes) -> None:
    """Replace the file at ``path`` with ``data``, if it still holds ``expected``.

    ``data`` goes to a temporary file in the same folder (flushed and synced, with the
    original's mode), which is renamed over the original only after checking that the file
    still holds the bytes the fix was computed from. A symbolic link is followed: its target
    is replaced, the link stays.

    Raises:
        FileChangedError: the file changed since it was read; it is left as it is.
        OSError: the write failed (full disk, quota, permissions); the original is untouched
            and the temporary file is removed.
    """
    real = os.path.realpath(path)
    before = os.stat(real)
    if not os.access(real, os.W_OK):
        raise PermissionError(errno.EACCES, "the file is read-only")
    folder, name = os.path.split(real)
    handle, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".gradsmith-fix", dir=folder)
    try:
        with os.fdopen(handle, "wb") as fh:
            fh.write(data)
            fh.flush()
            _sync(fh.fileno())
        if (before.st_uid, before.st_gid) != (os.geteuid(), os.getegid()):
            try:  # keep the owner where we may (root fixing a user's file)
                os.chown(tmp, before.st_uid, before.st_gid)
            except OSError:
                pass
        os.chmod(tmp, stat.S_IMODE(before.st_mode))  # after chown, which clears set-id bits
        with open(real, "rb") as fh:
            if fh.read() != expected:
                raise FileChangedError(
                    "it changed on disk after it was read; its fixes were not written and "
                    "the newer content is kept (run --fix again)")
        os.replace(tmp, real)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _sync_folder(folder)


def _sync(fd: int) -> None:
    """``fsync``, where the file system can: a full disk or quota often shows only here."""
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP):  # cannot sync: not a write error
            raise


def _sync_folder(folder: str) -> None:
    """Make the rename durable (best effort: some file systems cannot sync a folder)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
