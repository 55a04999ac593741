"""stdout that a reader closed (``gradsmith ... | head``) or that cannot take more (a full disk).

:func:`guarded_stdout` wraps ``sys.stdout`` for one command so a failed write to it raises
:class:`StdoutError`, told apart from every other ``OSError`` (a worker's pipe, an ``--html``
file); :func:`main <gradsmith.cli.main>` turns it into an exit status:

- a closed pipe: nothing on stderr and :data:`CLOSED_PIPE_EXIT` (141 = 128 + SIGPIPE), the
  status a shell shows for ``git log | head``: the reader had what it wanted;
- any other write error (``ENOSPC``, ``EDQUOT``, ``EIO``): one line on stderr and exit 2.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

CLOSED_PIPE_EXIT = 141


class StdoutError(Exception):
    """A write to standard output failed; ``cause`` is the ``OSError``."""

    def __init__(self, cause: OSError) -> None:
        super().__init__(str(cause))
        self.cause = cause


class _Guarded:
    """``stream`` with its write errors raised as :class:`StdoutError` (else the same)."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError as exc:
            raise StdoutError(exc) from exc

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            raise StdoutError(exc) from exc

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


@contextlib.contextmanager
def guarded_stdout() -> Iterator[None]:
    """``sys.stdout`` guarded for the block, flushed at its end (so a late error is caught
    here, not at interpreter exit), and restored afterwards."""
    original = sys.stdout
    if original is None:
        yield
        return
    sys.stdout = _Guarded(original)
    try:
        yield
        sys.stdout.flush()
    finally:
        sys.stdout = original


def exit_status(error: StdoutError, command: str | None) -> int:
    """Report ``error`` (one line on stderr unless the reader went away) and silence stdout,
    so the interpreter's own flush at exit has nothing left to fail on; return the status."""
    _discard_stdout()
    if isinstance(error.cause, BrokenPipeError):
        return CLOSED_PIPE_EXIT
    prefix = f"gradsmith {command}" if command else "gradsmith"
    reason = error.cause.strerror or str(error.cause)
    print(f"{prefix}: error: cannot write to standard output: {reason}", file=sys.stderr,
          flush=True)
    return 2


def _discard_stdout() -> None:
    """Point file descriptor 1 at /dev/null and drop what the buffer still holds."""
    stream = sys.stdout
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):  # a test's capture stream: nothing to do
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)
    with contextlib.suppress(OSError, ValueError):
        stream.flush()  # now into /dev/null: empties the buffer
