"""Run tasks isolated, with a time limit each: the ``gradsmith check`` side of the worker (private).

:class:`WorkerPool` starts one worker server (``python -m gradsmith.isolation.worker``), which
imports torch once and runs each task in a fresh fork of itself, up to ``jobs`` at a time (see
:mod:`gradsmith.isolation.worker` for why). A task whose process dies (segfault,
``os.abort``, ``os._exit`` in user code) or runs past the time limit becomes a ``crash`` or
``timeout`` :class:`Outcome` that keeps the progress the task streamed; the other tasks go on.

Plain ``subprocess`` pipes are used rather than ``multiprocessing``/``concurrent.futures``:
those cannot kill one hung task without breaking the whole pool, and ``spawn`` re-imports the
parent's ``__main__``.
"""

from __future__ import annotations

import os
import pickle
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gradsmith._errors import GradsmithError
from gradsmith.isolation.processes import (
    adopting,
    available_memory,
    children,
    describe_returncode,
    kill_below,
    usable_cpus,
)
from gradsmith.isolation.protocol import FIELDS, FrameReader, plain, send, server_message
from gradsmith.isolation.template import (
    ADDRESS_ENV,
    ForkedServer,
    Template,
    installed,
    server_env,
)

# Importing torch in a fresh interpreter takes 1-3 s; allow a loaded machine much more.
STARTUP_TIMEOUT = 120.0
# Memory one concurrent task is allowed to need when --jobs is capped.
MEMORY_PER_JOB = 1 << 30
# The server enforces each time limit; past this much more, it is declared hung.
_WATCHDOG_GRACE = 30.0
# A server that dies is replaced this many times in one run, for the tasks it had not started.
_RESTARTS = 3
_TAIL_LINES = 12


@dataclass(frozen=True)
class Outcome:
    """Result of task ``index``.

    Attributes:
        index: position of the task in the list given to :meth:`WorkerPool.run`.
        kind: ``ok`` (``value`` is the task's result), ``crash`` or ``timeout`` (``value`` is
            a message with the task's last output).
        value: see ``kind``.
        elapsed: seconds from the task's start to its end.
        progress: the last progress message the task streamed (``None`` if none).
    """

    index: int
    kind: str
    value: Any
    elapsed: float = 0.0
    progress: dict | None = None


def capacity() -> tuple[int, str]:
    """How many tasks this machine can run at once, and why: one per CPU this process may use,
    and no more than the available memory allows at :data:`MEMORY_PER_JOB` each.

    Returns:
        ``(jobs, "2 CPUs, 18.3 GB of memory available")``.
    """
    cpus = usable_cpus()
    memory = available_memory()
    jobs = cpus
    if memory is not None:
        jobs = max(1, min(jobs, memory // MEMORY_PER_JOB))
    gb = f", {memory / 1e9:.1f} GB of memory available" if memory is not None else ""
    return jobs, f"{cpus} CPU{'s' if cpus != 1 else ''}{gb}"


class WorkerPool:
    """Run tasks in forks of one worker server, ``jobs`` at a time, ``timeout`` seconds each.

    Use as a context manager (the server and everything below it are stopped on exit) and
    iterate ``pool.run([(kind, *args), ...])``; tasks are those of
    :func:`gradsmith.isolation.task.run_task`, ``kind`` the dotted name of the module doing it.

    Args:
        jobs: tasks run at once (callers cap it with :func:`capacity`).
        timeout: seconds allowed per task, from its fork to its result.
        startup_timeout: seconds the server may take to import torch and warm up.
        on_wait: called as ``on_wait(seconds)`` about once a second while the server starts.
        threads: torch threads per task (default: the CPUs shared out among ``jobs``).
        modules: modules of gradsmith the server imports once, before its first task, so
            that no task pays for them: the kinds of its tasks (see
            :func:`gradsmith.isolation.task.task_module`) and what they use.
    """

    def __init__(self, jobs: int = 1, timeout: float = 60.0,
                 startup_timeout: float = STARTUP_TIMEOUT,
                 on_wait: Callable[[float], None] | None = None,
                 threads: int | None = None, modules: tuple[str, ...] = ()) -> None:
        if jobs < 1:
            raise GradsmithError(f"WorkerPool: jobs must be >= 1, got {jobs}")
        self.jobs = jobs
        self.timeout = timeout
        self.startup_timeout = startup_timeout
        self.on_wait = on_wait
        # torch threads per task: the CPUs shared out, unless the caller fixes it (bench)
        threads = threads or max(1, usable_cpus() // jobs)
        search = [p for p in sys.path if p]
        cwd = os.getcwd()  # dotted targets are found from here, as `python -m` does
        self._init = {"sys_path": search if cwd in search else [cwd, *search],
                      "jobs": jobs, "threads": threads, "modules": list(modules),
                      "import_timeout": startup_timeout}
        self._proc: subprocess.Popen | None = None
        self._reader = FrameReader()
        self._selector = selectors.DefaultSelector()
        self._ready = False
        self._log = ""
        self._folder = ""  # the server's log and its task logs' folder: removed by close()
        self._before: set[int] = set()

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self.close(graceful=exc_type is None)  # on Ctrl-C or an error, do not wait

    def start(self) -> None:
        """Start the server now, so its torch import overlaps whatever the caller does next."""
        if self._proc is not None:
            return
        # Children this process already had are not the run's (see _kill_adopted).
        self._before = children(os.getpid()) if adopting() else set()
        # Made and removed here, not by the server: a server killed from outside (or by user
        # code) cannot remove its own files.
        self._folder = tempfile.mkdtemp(prefix="gradsmith-worker-")
        self._log = os.path.join(self._folder, "server.log")
        fd = os.open(self._log, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        env = server_env()
        logs = os.path.join(self._folder, "tasks")
        try:
            self._proc = self._forked(env, logs, fd) or subprocess.Popen(
                [sys.executable, "-m", "gradsmith.isolation.worker", str(os.getpid()), logs],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=fd, env=env,
                start_new_session=True)  # Ctrl-C reaches gradsmith check, which stops it
        except BaseException:
            shutil.rmtree(self._folder, ignore_errors=True)
            raise
        finally:
            os.close(fd)
        self._ready = False
        self._reader = FrameReader()
        self._selector.register(self._proc.stdout, selectors.EVENT_READ)
        send(self._proc.stdin, self._init)

    @staticmethod
    def _forked(env: dict[str, str], logs: str, log_fd: int) -> ForkedServer | None:
        """A server forked from the warm template (:mod:`.template`) installed in this process,
        or else the one at ``GRADSMITH_WORKER_TEMPLATE``, when there is one and this
        environment fits it; None: start a fresh interpreter."""
        template, attached = installed(), None
        if template is None and os.environ.get(ADDRESS_ENV):  # another process's
            template = attached = Template.attach(os.environ[ADDRESS_ENV])
        try:
            if template is None or not template.fits(env):
                return None
            return template.spawn(env, logs, log_fd)
        except OSError:  # the template died: a fresh interpreter, as without one
            return None
        finally:
            if attached is not None:
                attached.close()

    def run(self, tasks: list[tuple],
            on_progress: Callable[[int, dict], None] | None = None) -> Iterator[Outcome]:
        """Yield one :class:`Outcome` per task, in completion order.

        Args:
            tasks: tasks for :func:`gradsmith.isolation.task.run_task`.
            on_progress: called as ``on_progress(index, snapshot)`` when a task reports
                progress (a check of it finished).

        Raises:
            GradsmithError: the server could not start (within the start-up limit).
        """
        if not tasks:
            return
        pending = set(range(len(tasks)))
        started: dict[int, float] = {}
        progress: dict[int, dict] = {}
        for attempt in range(_RESTARTS + 1):
            self.start()
            for index in sorted(pending):
                send(self._proc.stdin, ("task", index, tasks[index], self.timeout))
            yield from self._collect(pending, started, progress, on_progress)
            if not pending:
                return
            # The server died (killed from outside, or by user code): the tasks it was running
            # crashed; the others have not started and go to a new server.
            why = self._server_gone()
            for index in sorted(started):
                pending.discard(index)
                yield Outcome(index, "crash", why, time.monotonic() - started[index],
                              progress.get(index))
            started.clear()
            if attempt == _RESTARTS:
                for index in sorted(pending):
                    yield Outcome(index, "crash", why, 0.0, None)
            if not pending:
                return

    def _collect(self, pending: set[int], started: dict[int, float], progress: dict[int, dict],
                 on_progress: Callable[[int, dict], None] | None) -> Iterator[Outcome]:
        """Outcomes of the server's messages until every task ended or the server is gone."""
        waiting_since = time.monotonic()
        while pending:
            message = self._next(waiting_since, started)
            if message is None:
                return
            kind, index = message[0], message[1] if len(message) > 1 else None
            if kind != "ready" and (type(index) is not int or index not in pending
                                    or len(message) != FIELDS.get(kind)
                                    or kind == "ended" and not isinstance(message[3], dict)):
                continue  # not a message of the server about a task of this run
            if kind == "ready":
                self._ready = True
            elif kind == "started":
                started[index] = time.monotonic()
            elif kind == "interpreted" and isinstance(message[2], float):
                started[index] = started.get(index, time.monotonic()) + message[2]
            elif kind == "progress":
                snap = plain(message[2])
                if not isinstance(snap, dict):  # not gradsmith's: user code wrote it
                    continue
                if snap.pop("_merge", False):  # a detail of the last snapshot, not a new one
                    progress[index] = {**progress.get(index, {}), **snap}
                    continue
                if "repro" in progress.get(index, {}):  # sent once, before the first check
                    snap.setdefault("repro", progress[index]["repro"])
                progress[index] = snap
                if on_progress is not None:
                    on_progress(index, progress[index])
            elif kind == "result":
                pending.discard(index)
                started.pop(index, None)
                value = plain(message[2])
                if isinstance(value, pickle.UnpicklingError):
                    yield Outcome(index, "crash", f"{_FORGED} ({value})", message[3],
                                  progress.get(index))
                    continue
                yield Outcome(index, "ok", value, message[3],
                              progress.get(index))
            elif kind == "ended":
                pending.discard(index)
                started.pop(index, None)
                yield Outcome(index, message[2], self._describe(message[2], message[3]),
                              message[4], progress.get(index))

    def close(self, graceful: bool = True) -> None:
        """Stop the server; it kills every process below it (closing stdin asks it to)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            self._selector.unregister(proc.stdout)
        except (KeyError, ValueError):
            pass
        try:
            proc.stdin.close()
        except OSError:
            pass
        for sig, wait in ((None, 5.0 if graceful else 1.0), (signal.SIGTERM, 5.0),
                          (signal.SIGKILL, None)):
            if sig is not None:
                try:
                    proc.send_signal(sig)
                except OSError:
                    pass
            try:
                proc.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        proc.stdout.close()
        self._kill_adopted()
        shutil.rmtree(self._folder, ignore_errors=True)

    def _kill_adopted(self) -> None:
        """Kill what user code left after killing both its keeper and the server: the
        ``gradsmith`` command makes its process a subreaper (:func:`adopting`), so such
        processes became its children instead of init's."""
        if not adopting():
            return
        kill_below(keep=self._before)

    def _next(self, waiting_since: float, started: dict[int, float]) -> tuple | None:
        """The server's next message; None when it died or stopped answering."""
        while True:
            for payload in self._reader.feed(b""):
                return server_message(payload)
            now = time.monotonic()
            if not self._ready:
                if now - waiting_since > self.startup_timeout:
                    self._startup_failed(f"did not start within {self.startup_timeout:g} s "
                                         "(raise --startup-timeout on a loaded machine)")
                if self.on_wait is not None:
                    self.on_wait(now - waiting_since)
            elif started and now > min(started.values()) + max(
                    self.timeout, self.startup_timeout) + _WATCHDOG_GRACE:
                return None
            wait = 1.0 if self._ready else min(1.0, max(
                0.0, waiting_since + self.startup_timeout - now))
            if self._selector.select(timeout=wait):
                data = os.read(self._proc.stdout.fileno(), 1 << 16)
                if not data:
                    if not self._ready:
                        self._startup_failed(f"exited with {self._exit_text()}")
                    return None
                for payload in self._reader.feed(data):
                    return server_message(payload)

    def _startup_failed(self, why: str) -> None:
        tail = _read_tail(self._log)
        self.close(graceful=False)
        raise GradsmithError(f"check: the isolated worker process {why}{_format_tail(tail)}; "
                             "fix the environment, or run with --no-isolate")

    def _server_gone(self) -> str:
        tail = _read_tail(self._log)
        how = self._exit_text()
        self.close(graceful=False)
        return (f"the gradsmith worker server stopped answering ({how}) while this ran: code "
                f"running in it killed it, or the machine did (out of memory?), or it is a "
                f"gradsmith bug{_format_tail(tail)}")

    def _exit_text(self) -> str:
        try:
            code = self._proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            return "it hung"
        return describe_returncode(code)

    def _describe(self, kind: str, info: dict) -> str:
        tail = _format_tail(info.get("tail", ""))
        if kind == "timeout" and info.get("interpreted"):
            return (f"timed out after {info.get('limit', self.timeout):g} s, the --timeout "
                    f"of {self.timeout:g} s scaled because its Triton kernels ran in Triton's "
                    "interpreter (20-500x slower than on a GPU; the task and every process "
                    f"it started were killed; raise --timeout if it is just slow){tail}")
        if kind == "timeout" and info.get("aborted"):
            return ("ended once glibc's heap check had aborted it and its output had gone "
                    "quiet (a crash handler hung in the corrupted heap), not waited out to the "
                    f"--timeout of {self.timeout:g} s; the task and every process it started "
                    f"were killed{tail}")
        if kind == "timeout" and info.get("importing"):
            return (f"importing it timed out after {info.get('limit', self.timeout):g} s, the "
                    "start-up limit (--startup-timeout; the task and every process it started "
                    f"were killed; raise --startup-timeout if it is just slow){tail}")
        if kind == "timeout":
            return (f"timed out after {self.timeout:g} s (the task and every process it "
                    f"started were killed; raise --timeout if it is just slow){tail}")
        return f"the process running it ended without a result: {info.get('exit')}{tail}"


_FORGED = ("its result was not gradsmith's: user code wrote a message of its own into "
           "gradsmith's result pipe, so no verdict can be trusted")


def _read_tail(path: str) -> str:
    try:
        text = Path(path).read_bytes()[-65536:].decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-_TAIL_LINES:])


def _format_tail(tail: str) -> str:
    return f"; its last output:\n{tail}" if tail.strip() else ""
