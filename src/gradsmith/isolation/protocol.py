"""Messages between gradsmith's processes: an 8-byte big-endian length, then a pickle (private).

Blocking streams use :func:`send` and :func:`receive`; a process that watches several pipes at
once reads what is there with :func:`os.read` and feeds it to a :class:`FrameReader`, which
returns the payloads as bytes: the worker server forwards what a task process sends without
unpickling it, so nothing user code writes can run code in the server. ``gradsmith check``
unpickles what it receives with :func:`loads`, which builds plain data and gradsmith's own
records only: a forged frame (user code can write into any pipe it can reach) cannot name a
function to call in gradsmith's process.
"""

from __future__ import annotations

import io
import os
import pickle
import struct
from collections.abc import Iterator
from typing import IO, Any

_HEADER = struct.Struct(">Q")


# The only classes a worker's messages hold besides builtin containers and scalars.
_RECORDS = {("gradsmith.discovery.collect", "Candidate"), ("gradsmith.discovery.collect", "Ref")}


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _RECORDS:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"it names {module}.{name}, which is not plain data")


def loads(payload: bytes) -> Any:
    """Unpickle a message from a worker: builtin data and gradsmith's records, nothing else.

    Raises:
        pickle.UnpicklingError: the payload names another class or a function (it was not
            written by gradsmith), or is not a pickle at all.

    Example:
        >>> loads(pickle.dumps({"verdict": "pass", "elapsed": 0.5}))
        {'verdict': 'pass', 'elapsed': 0.5}
        >>> loads(pickle.dumps(print))
        Traceback (most recent call last):
        ...
        _pickle.UnpicklingError: it names builtins.print, which is not plain data
    """
    try:
        return _PlainUnpickler(io.BytesIO(payload)).load()
    except pickle.UnpicklingError:
        raise
    except Exception as exc:  # truncated or garbage bytes raise all sorts of errors
        raise pickle.UnpicklingError(f"not a pickle ({type(exc).__name__}: {exc})") from None


def plain(payload: bytes) -> Any:
    """:func:`loads`, returning the error instead of raising it."""
    try:
        return loads(payload)
    except pickle.UnpicklingError as exc:
        return exc


#: The worker server's messages about a task, by kind: how many fields each has.
FIELDS = {"started": 2, "progress": 3, "result": 4, "ended": 5, "interpreted": 3}


def server_message(payload: bytes) -> tuple:
    """A message of the worker server: a tuple naming its kind (what else was written there,
    by user code reaching the pipe, reads as the unknown kind ``("unknown",)``)."""
    message = plain(payload)
    if isinstance(message, tuple) and message and isinstance(message[0], str):
        return message
    return ("unknown",)


def encode(message: Any) -> bytes:
    """One framed message."""
    return frame(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))


def send(stream: IO[bytes], message: Any) -> None:
    """Write one framed message to a binary stream and flush it."""
    stream.write(encode(message))
    stream.flush()


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to a file descriptor, however the pipe splits it."""
    data = memoryview(data)
    while data:
        data = data[os.write(fd, data):]


def receive(stream: IO[bytes]) -> Any:
    """Read one framed message; raise EOFError when the other side is gone."""
    header = _read_exactly(stream, _HEADER.size)
    return pickle.loads(_read_exactly(stream, _HEADER.unpack(header)[0]))


def _read_exactly(stream: IO[bytes], size: int) -> bytes:
    chunks = []
    while size:
        chunk = stream.read(size)
        if not chunk:
            raise EOFError("peer closed the stream")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def frame(payload: bytes) -> bytes:
    """``payload`` with its length header."""
    return _HEADER.pack(len(payload)) + payload


class FrameError(Exception):
    """The bytes on a pipe are not a sequence of frames (something else wrote to it)."""


class FrameReader:
    """Collects bytes read from a pipe and returns the complete payloads in them.

    Args:
        limit: largest payload accepted; a larger length means the stream is corrupt.

    Example:
        >>> reader = FrameReader()
        >>> data = frame(b"a") + frame(b"bc")
        >>> list(reader.feed(data[:5])), list(reader.feed(data[5:]))
        ([], [b'a', b'bc'])
    """

    def __init__(self, limit: int = 1 << 30) -> None:
        self._buffer = bytearray()
        self._limit = limit

    def feed(self, data: bytes) -> Iterator[bytes]:
        """Add ``data``; yield every payload now complete. Raises :class:`FrameError`."""
        self._buffer += data
        while len(self._buffer) >= _HEADER.size:
            size = _HEADER.unpack_from(self._buffer)[0]
            if size > self._limit:
                raise FrameError(f"a frame of {size} bytes (more than {self._limit})")
            end = _HEADER.size + size
            if len(self._buffer) < end:
                return
            payload = bytes(self._buffer[_HEADER.size:end])
            del self._buffer[:end]
            yield payload

    @property
    def pending(self) -> int:
        """Bytes of an incomplete frame still waiting for the rest."""
        return len(self._buffer)
