"""Worker process for isolated checks: ``python -m gradsmith.isolation.worker`` (private).

Speaks a tiny protocol on its original stdin/stdout: each message is an 8-byte big-endian
length followed by a pickle. The parent first sends ``{"sys_path": [...], "threads": n}``; the
worker imports torch and answers ``"ready"``; then every message is a task for
:func:`gradsmith.isolation.tasks.run_task`, answered with its result, until the parent closes stdin.

User code never sees the protocol streams: its stdout goes to stderr (a log file the parent
reads back when the worker crashes), and its stdin is empty. ``faulthandler`` prints a Python
traceback on a segfault or abort, so a crash row can say where it happened.
"""

from __future__ import annotations

import faulthandler
import os
import pickle
import struct
import sys
import traceback
from typing import IO, Any

_HEADER = struct.Struct(">Q")


def send(stream: IO[bytes], message: Any) -> None:
    """Write one framed message and flush it."""
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(payload)) + payload)
    stream.flush()


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


def main() -> int:
    """Serve tasks until stdin closes."""
    proto_in = os.fdopen(os.dup(0), "rb")
    proto_out = os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(2, 1)  # user prints land in the log, never in the protocol stream
    faulthandler.enable(file=sys.stderr)
    try:
        init = receive(proto_in)
    except EOFError:
        return 0
    sys.path[:0] = [p for p in init.get("sys_path", []) if p not in sys.path]
    import torch

    if init.get("threads"):
        torch.set_num_threads(int(init["threads"]))
    from gradsmith.isolation.tasks import run_task

    _warm_up()
    send(proto_out, "ready")
    while True:
        try:
            task = receive(proto_in)
        except EOFError:
            return 0
        print(f"--- gradsmith task: {task[0]} ---", file=sys.stderr, flush=True)
        try:
            payload = pickle.dumps(run_task(task), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # a gradsmith bug must still produce a row, not a dead worker
            payload = pickle.dumps({"worker_error": "".join(
                traceback.format_exception(type(exc), exc, exc.__traceback__)[-6:])})
        proto_out.write(_HEADER.pack(len(payload)) + payload)
        proto_out.flush()


def _warm_up() -> None:
    """Check one tiny Function, so the verifier's lazy imports (torch.func pulls in seconds of
    modules) are paid during start-up, not inside the first user task's time limit."""
    try:
        import torch

        from gradsmith.checker import check
        from gradsmith.examples.gradient_control import Square

        check(Square, torch.ones(2, dtype=torch.float64, requires_grad=True))
    except Exception:  # a broken verifier shows up, with context, in the first real task
        pass


if __name__ == "__main__":
    raise SystemExit(main())
