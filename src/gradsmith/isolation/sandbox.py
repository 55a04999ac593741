"""One task in a fresh fork of the worker server: a keeper process and the task process (private).

The worker server (:mod:`gradsmith.isolation.worker`) has imported torch and its tasks' modules but
no user code. For every task it forks a *keeper*, which forks the *task process*:

- the task process starts from the server's clean state (nothing an earlier task patched,
  imported or seeded is there), runs the task and writes its progress and result to a pipe;
- the keeper runs no user code. It is a child subreaper, so every process the task starts
  stays below it even if it starts a new session, and it reaps those that end meanwhile;
  when the task process ends (result, crash, or SIGTERM from the server on timeout) it kills
  everything left below it, writes the task process's exit status and exits. The pipe therefore reaches end-of-file exactly when the
  task and all it started are gone: a task that forks and then crashes is a crash at once,
  not a timeout.

Frames on the pipe (see :mod:`.protocol`): one kind byte, then ``e`` progress (a pickled
snapshot), ``r`` the result (pickled), ``x`` the exit status (4 bytes, keeper only), ``d``
(empty) a deployment check starts: the server then gives it a time limit of its own, so
compiling and exporting never eat into the eager checks' (nor into each other's). The
server forwards ``e`` and ``r`` to ``gradsmith check`` without unpickling them.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import struct
import sys
from typing import Any

from gradsmith.isolation.processes import (
    become_subreaper,
    describe_exit,
    die_with_parent,
    kill_below,
    signal_quietly,
)
from gradsmith.isolation.protocol import frame, write_all
from gradsmith.isolation.tasklog import TaskLog

EVENT, RESULT, EXIT, DEPLOY = b"e", b"r", b"x", b"d"
#: A task's Triton kernels run in the interpreter (20-500x slower): its time limit is scaled.
INTERPRETED = b"i"
#: The task imported the user's code: its time limit starts again, at ``--timeout``.
IMPORTED = b"m"
#: Exit code of a task process whose pipe user code closed or broke: no result can be sent.
LOST_PIPE = 113
#: Exit code of a task process whose gradsmith code failed (its traceback is in the log).
INTERNAL = 70
_STATUS = struct.Struct(">i")


def start(task: tuple, *, threads: int, log_fd: int, close_fds: list[int]) -> tuple[int, int]:
    """Fork the keeper of ``task``; return ``(keeper pid, read end of its pipe)``.

    Args:
        task: a task for :func:`gradsmith.isolation.task.run_task`.
        threads: torch intra-op threads for the task.
        log_fd: file the task's stdout and stderr are kept in, within a bound (its keeper
            reads them from a pipe into a :class:`~.tasklog.TaskLog`; faulthandler writes
            there too).
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
                kill_below()
            os._exit(code)
    os.close(write_end)
    return pid, read_end


def _keeper(task: tuple, threads: int, log_fd: int, pipe: int, server: int) -> int:
    child = 0
    timed_out = False

    def on_term(signum: int, frame_: Any) -> None:  # timeout, or the server is shutting down
        nonlocal timed_out
        timed_out = True
        if child:  # the loop below sees it end and kills the rest
            signal_quietly(child, signal.SIGKILL)

    wake_r, wake_w = os.pipe()  # SIGCHLD wakes the loop that reaps
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGTERM, on_term)
    die_with_parent(signal.SIGTERM, server)
    become_subreaper()
    keeper = os.getpid()
    out_r, out_w = os.pipe()  # the task's stdout and stderr, kept bounded in the log
    child = os.fork()
    if child == 0:
        code = INTERNAL
        try:
            signal.set_wakeup_fd(-1)
            for fd in (wake_r, wake_w, out_r, log_fd):
                os.close(fd)
            code = _task_process(task, threads, out_w, pipe, keeper)
        except BaseException:  # gradsmith's own code failed (user code's errors are results)
            import traceback

            traceback.print_exc()  # into the task's log: the row shows it
        finally:
            os._exit(code)
    if timed_out:  # SIGTERM came before the fork returned
        signal_quietly(child, signal.SIGKILL)
    os.close(out_w)
    os.set_blocking(out_r, False)
    log = TaskLog(log_fd)
    status = _reap_until(child, wake_r, out_r, log)
    _killpg(child)  # its process group: all there is to find where /proc is missing (macOS)
    if _has_children():  # whatever the task started, in any session, is below the keeper
        kill_below()
    _drain(out_r, log.write)  # what the task and its processes wrote before they ended
    os.close(log_fd)
    write_all(pipe, frame(EXIT + _STATUS.pack(status)))
    return 0


def _reap_until(child: int, wake: int, out: int, log: TaskLog) -> int:
    """Copy the task's output to ``log`` and reap every process that ends below the keeper,
    until ``child`` (the task process) has ended; return its status. Orphans the task leaves
    are adopted by the keeper and reaped as they end, so a task forking thousands of
    short-lived processes leaves no zombies."""
    watched = [wake, out]
    while True:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:  # cannot happen while the child is unreaped
                return 0
            if pid == child:
                return status
            if pid == 0:
                break
        readable = select.select(watched, [], [], 1.0)[0]
        if out in readable and not _drain(out, log.write, chunks=16):  # then reap
            watched = [wake]  # every writer closed it: only endings to wait for
        _drain(wake)


def _drain(fd: int, sink=None, chunks: int = 1 << 40) -> bool:
    """Read what ``fd`` (non-blocking) holds now, at most ``chunks`` reads, into ``sink``;
    False at end-of-file."""
    try:
        for _ in range(chunks):
            data = os.read(fd, 1 << 16)
            if not data:
                return False
            if sink is not None:
                sink(data)
    except OSError:  # BlockingIOError: nothing more for now
        pass
    return True


def _task_process(task: tuple, threads: int, out: int, pipe: int, keeper: int) -> int:
    os.setpgid(0, 0)  # its own process group: os.kill(0, ...) in user code hits only the task
    os.dup2(out, 1)  # user prints and faulthandler tracebacks go to this task's log
    os.dup2(out, 2)
    os.close(out)
    for sig in (signal.SIGTERM, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    # As in any Python program: a SIGINT (only user code can send one: the task has its own
    # process group) raises KeyboardInterrupt at the user's line, reported as such.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    die_with_parent(signal.SIGKILL, keeper)
    _prefer_for_oom_killer()
    import torch

    torch.set_num_threads(threads)
    me = os.getpid()

    def emit(kind: bytes, message: Any = None) -> None:
        if os.getpid() != me:  # a fork made by user code reached gradsmith's code: stop it
            os._exit(0)
        body = b"" if message is None else pickle.dumps(message,
                                                          protocol=pickle.HIGHEST_PROTOCOL)
        try:
            write_all(pipe, frame(kind + body))
        except OSError:  # user code closed or replaced the descriptor
            os._exit(LOST_PIPE)

    from gradsmith._triton import launches
    from gradsmith.isolation.task import run_in_worker

    deploying = None  # the deployment check running
    # launches before the task; said it runs interpreted; said its user code is imported
    kernels = [launches(), False, False]

    def progress(snapshot: dict) -> None:
        nonlocal deploying
        if snapshot.get("imported") is True and not kernels[2]:
            kernels[2] = True
            emit(IMPORTED)  # the import had the start-up limit; the work gets --timeout
            return
        if snapshot.get("in_deployment") and snapshot.get("running") != deploying:
            deploying = snapshot.get("running")
            emit(DEPLOY)  # before the snapshot: the server restarts the clock for it
        if not kernels[1] and launches() > kernels[0]:
            kernels[1] = True
            emit(INTERPRETED)  # the server scales this task's time limit, once
        emit(EVENT, snapshot)

    result = run_in_worker(task, progress)
    emit(RESULT, result)
    sys.stdout.flush()
    sys.stderr.flush()
    return 0


def describe_end(status: int | None, *, corrupt: bool = False, killed: bool = False) -> str:
    """How a task process ended without a result, in words.

    Args:
        status: its :func:`os.waitpid` status (``None``: unknown).
        corrupt: its pipe carried something that was not gradsmith's frames.
        killed: gradsmith killed it (time limit), so a SIGKILL needs no explanation.

    Example:
        >>> describe_end(7 << 8)
        "exit code 7 (user code ended the process with os._exit() or a C library's exit())"
    """
    if corrupt:
        return "user code wrote into gradsmith's result pipe, so its result was lost"
    if status is None:
        return "it vanished without an exit status"
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == LOST_PIPE:
        return ("user code closed gradsmith's result pipe (a file descriptor it did not "
                "open), so its result was lost")
    how = describe_exit(status)
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == INTERNAL:
        how += " (gradsmith failed in the task process; its traceback is below)"
    elif os.WIFEXITED(status):  # sys.exit is a SystemExit row: this was os._exit or C exit()
        how += " (user code ended the process with os._exit() or a C library's exit())"
    if how == "signal SIGKILL" and not killed:
        how += " (sent by the Function itself, from outside, or by the kernel when memory ran out)"
    return how


def exit_status(payload: bytes) -> int:
    """The status carried by an ``x`` frame."""
    return _STATUS.unpack(payload[1:])[0]


def _killpg(group: int) -> None:
    try:
        os.killpg(group, signal.SIGKILL)
    except OSError:  # no process left in it
        pass


def _has_children() -> bool:
    """True while this process has a child (reaping those already dead): every process a task
    started and that is still alive descends from a living child of the keeper (a subreaper),
    so without one there is nothing to kill and ``/proc`` need not be read."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True


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
