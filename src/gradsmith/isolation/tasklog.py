"""A task's output: what user code prints, kept on disk within a bound, and its last lines (private).

A task process's stdout and stderr are a pipe that its keeper (:mod:`.sandbox`) reads into a
:class:`TaskLog`: the file holds the last :data:`KEEP` bytes at least and never more than twice
that, however much a Function prints (5 MB per forward call grew a plain log file to 195 MB).
Only the end is ever shown (:func:`log_tail`), so nothing shown is lost.
"""

from __future__ import annotations

import os
import re

#: Bytes of a task's latest output always kept (the file grows to at most twice this).
KEEP = 256 * 1024
_TAIL_LINES = 12
# Lines user code printed just before a crash, shown above its traceback.
_PRINTED_BEFORE_CRASH = 3


#: glibc's heap check: the message it prints just before it aborts the process.
HEAP_CHECK = re.compile(
    r"double free or corruption|free\(\): invalid|corrupted size vs\. prev_size|"
    r"corrupted double-linked list|malloc\(\): (?:memory )?corrupt|munmap_chunk\(\): invalid|"
    r"realloc\(\): invalid")


class TaskLog:
    """Writes output to ``fd`` (a regular file) and, past ``2 * keep`` bytes, rewrites the file
    with only the last ``keep`` bytes. Write errors (a full disk) are ignored: the task must
    not block on its output, and the log only explains a crash.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryFile() as f:
        ...     log = TaskLog(f.fileno(), keep=4)
        ...     for chunk in (b"abc", b"def", b"gh", b"i"):  # the 9th byte passes 2 * keep
        ...         log.write(chunk)
        ...     _ = f.seek(0)
        ...     f.read()
        b'fghi'
    """

    def __init__(self, fd: int, keep: int = KEEP) -> None:
        self.fd, self.keep = fd, keep
        self.size = 0
        self.tail = bytearray()

    def write(self, data: bytes) -> None:
        self.tail += data
        del self.tail[:-self.keep]
        try:
            if self.size + len(data) > 2 * self.keep:
                os.ftruncate(self.fd, 0)
                os.lseek(self.fd, 0, os.SEEK_SET)
                data, self.size = bytes(self.tail), 0
            view = memoryview(data)
            while view:
                view = view[os.write(self.fd, view):]
            self.size += len(data)
        except OSError:
            pass


def log_tail(path: str) -> str:
    """The last lines a task printed; for a crash, the traceback faulthandler wrote, without
    gradsmith's own frames (the worker calling the check says nothing about the user's bug)."""
    try:
        with open(path, "rb") as log:
            log.seek(max(0, os.path.getsize(path) - 65536))
            text = log.read().decode("utf-8", "replace")
    except OSError:
        return ""
    # The fatal error's text may follow what user code printed on the same line (a
    # print(..., end="")): it starts wherever it is found, not only at a line's start.
    fatal = text.rfind("Fatal Python error")
    if fatal >= 0:  # faulthandler prints the innermost (user) frames first
        block = [ln for ln in text[fatal:].splitlines() if "/gradsmith/" not in ln
                 and "<frozen runpy>" not in ln]
        if "" in block[2:]:  # the traceback ends at the first blank line after it
            block = block[:block.index("", 2)]
        printed = text[:fatal].splitlines()[-_PRINTED_BEFORE_CRASH:]  # the user's last words
        return "\n".join(printed + block[:_TAIL_LINES])
    return "\n".join(text.splitlines()[-_TAIL_LINES:])


def heap_aborted(path: str) -> tuple[str | None, int]:
    """The line of a task's latest output where glibc's heap check aborts it (``None``: none),
    and the log's size.

    A process that printed this is dying: glibc calls abort() next. A crash handler a library
    installed (cling's runs a debugger for a backtrace) can then hang in the corrupted heap
    until the time limit; the caller ends the task once the log stops growing instead of
    waiting that out (the size tells it whether the log is still growing), and shows this
    line even when a long backtrace pushed it out of the last lines."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as log:
            log.seek(max(0, size - 65536))
            text = log.read().decode("utf-8", "replace")
    except OSError:
        return None, 0
    found = HEAP_CHECK.search(text)
    if found is None:
        return None, size
    start = text.rfind("\n", 0, found.start()) + 1
    end = text.find("\n", found.end())
    return text[start:end if end >= 0 else len(text)].strip(), size
