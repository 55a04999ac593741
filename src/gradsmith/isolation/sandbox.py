"""One task in a fresh fork of the worker server: a keeper process and the task process (private).

The worker server (:mod:`gradsmith.isolation.worker`) has imported torch and the verifier but no
user code. For every task it forks a *keeper*, which forks the *task process*:

- the task process starts from the server's clean state (nothing an earlier task patched,
  imported or seeded is there), runs the task and writes its progress and result to a pipe;
- the keeper runs no user code. It is a child subreaper, so every process the task starts
  stays below it even if it starts a new session; when the task process ends (result, crash,
  or SIGTERM from the server on timeout) it kills everything left below it, writes the task
  process's exit status and exits. The pipe therefore reaches end-of-file exactly when the
  task and all it started are gone: a task that forks and then crashes is a crash at once,
  not a timeout.

Frames on the pipe (see :mod:`.protocol`): one kind byte, then ``e`` progress (a pickled
snapshot), ``r`` the result (pickled), ``x`` the exit status (4 bytes, keeper only). The
server forwards ``e`` and ``r`` to ``gradsmith check`` without unpickling them.
"""

from __future__ import annotations

import os
import pickle
import signal
import struct
import sys
from typing import Any

from gradsmith.isolation.processes import become_subreaper, die_with_parent, kill_tree
from gradsmith.isolation.protocol import frame, write_all

EVENT, RESULT, EXIT = b"e", b"r", b"x"
#: Exit code of a task process whose pipe user code closed or broke: no result can be sent.
LOST_PIPE = 113
_STATUS = struct.Struct(">i")


def start(task: tuple, *, threads: int, log_fd: int, close_fds: list[int]) -> tuple[int, int]:
    """Fork the keeper of ``task``; return ``(keeper pid, read end of its pipe)``.

    Args:
        task: a task for :func:`gradsmith.isolation.tasks.run_task`.
        threads: torch intra-op threads for the task.
        log_fd: file the task's stdout and stderr go to (faulthandler writes there too).
        close_fds: the server's own descriptors, closed in the fork before user code runs.
    """
    read_end, write_end = os.pipe()
    server = os.getpid()
    pid = os.fork()
    if pid == 0:  # the keeper: never returns
        code = 70
        try:
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            for fd in [*close_fds, read_end]:
                _close(fd)
            code = _keeper(task, threads, log_fd, write_end, server)
        finally:
            if code:
                kill_tree(os.getpid())
            os._exit(code)
    os.close(write_end)
    return pid, read_end


def _keeper(task: tuple, threads: int, log_fd: int, pipe: int, server: int) -> int:
    child = 0
    timed_out = False

    def on_term(signum: int, frame_: Any) -> None:  # timeout, or the server is shutting down
        nonlocal timed_out
        timed_out = True
        if child:
            kill_tree(child, include_root=True)

    signal.signal(signal.SIGTERM, on_term)
    die_with_parent(signal.SIGTERM, server)
    become_subreaper()
    keeper = os.getpid()
    child = os.fork()
    if child == 0:
        code = 70
        try:
            code = _task_process(task, threads, log_fd, pipe, keeper)
        finally:
            os._exit(code)
    if timed_out:  # SIGTERM came before the fork returned
        kill_tree(child, include_root=True)
    os.close(log_fd)
    _, status = os.waitpid(child, 0)
    kill_tree(keeper)  # whatever the task started, in any session
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break
    write_all(pipe, frame(EXIT + _STATUS.pack(status)))
    return 0


def _task_process(task: tuple, threads: int, log_fd: int, pipe: int, keeper: int) -> int:
    os.setpgid(0, 0)  # its own process group: os.kill(0, ...) in user code hits only the task
    os.dup2(log_fd, 1)  # user prints and faulthandler tracebacks go to this task's log
    os.dup2(log_fd, 2)
    os.close(log_fd)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    die_with_parent(signal.SIGKILL, keeper)
    _prefer_for_oom_killer()
    import torch

    torch.set_num_threads(threads)
    me = os.getpid()

    def emit(kind: bytes, message: Any) -> None:
        if os.getpid() != me:  # a fork made by user code reached gradsmith's code: stop it
            os._exit(0)
        data = frame(kind + pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))
        try:
            write_all(pipe, data)
        except OSError:  # user code closed or replaced the descriptor
            os._exit(LOST_PIPE)

    from gradsmith.isolation.tasks import run_in_worker

    result = run_in_worker(task, lambda snapshot: emit(EVENT, snapshot))
    emit(RESULT, result)
    sys.stdout.flush()
    sys.stderr.flush()
    return 0


def exit_status(payload: bytes) -> int:
    """The status carried by an ``x`` frame."""
    return _STATUS.unpack(payload[1:])[0]


def _prefer_for_oom_killer() -> None:
    """If memory runs out, the kernel should kill user code, not gradsmith or the machine's
    other processes (raising one's own score needs no privilege)."""
    try:
        with open("/proc/self/oom_score_adj", "w") as handle:
            handle.write("1000")
    except OSError:
        pass


def _close(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass
