"""A pool of persistent worker processes with a time limit per task (private).

Each worker (``python -m gradsmith.isolation.worker``) imports torch once and then runs many tasks, so
isolation costs one interpreter start per worker, not per Function. A task whose worker dies
(segfault, ``os.abort``, ``sys.exit`` in user code) or exceeds the time limit becomes a
``crash`` or ``timeout`` :class:`Outcome`; the worker is replaced and the other tasks go on.

Plain ``subprocess`` pipes are used rather than ``multiprocessing``/``concurrent.futures``:
those cannot kill one hung task without breaking the whole pool, and ``spawn`` re-imports the
parent's ``__main__``.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gradsmith._errors import GradsmithError
from gradsmith.isolation.worker import receive, send

# Importing torch in a fresh interpreter takes 1-3 s; allow a loaded machine much more.
STARTUP_TIMEOUT = 120.0
_TAIL_LINES = 12


@dataclass(frozen=True)
class Outcome:
    """Result of task ``index``: ``kind`` is ``ok`` (``value`` is the task's result),
    ``crash`` or ``timeout`` (``value`` is a message with the worker's last output)."""

    index: int
    kind: str
    value: Any
    elapsed: float = 0.0


class WorkerPool:
    """Run tasks in ``jobs`` persistent workers, each task limited to ``timeout`` seconds.

    Use as a context manager (workers are stopped on exit) and iterate
    ``pool.run([("list", source), ...])``; tasks are those of :func:`gradsmith.isolation.tasks.run_task`.
    """

    def __init__(self, jobs: int = 1, timeout: float = 60.0, threads: int | None = None) -> None:
        if jobs < 1:
            raise GradsmithError(f"WorkerPool: jobs must be >= 1, got {jobs}")
        self.jobs = jobs
        self.timeout = timeout
        self._workers: list[_Worker] = []
        self._selector = selectors.DefaultSelector()
        self._failed_starts = 0
        # torch threads per worker: the CPUs shared out, unless the caller fixes it (bench)
        threads = threads or max(1, (os.cpu_count() or 1) // jobs)
        self._init = {"sys_path": [p for p in sys.path if p], "threads": threads}

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self.close(graceful=exc_type is None)  # on Ctrl-C or an error, do not wait

    def start(self) -> None:
        """Start all ``jobs`` workers now, so their torch imports overlap the first tasks."""
        self._fill(self.jobs)

    def run(self, tasks: list[tuple]) -> Iterator[Outcome]:
        """Yield one :class:`Outcome` per task, in completion order."""
        pending = deque(enumerate(tasks))
        busy = 0
        while pending or busy:
            self._fill(len(pending) + busy)
            for worker in list(self._workers):
                if worker.state == "idle" and pending:
                    busy += 1
                    try:
                        worker.assign(*pending.popleft(), self.timeout)
                    except OSError:  # died between tasks (e.g. a thread user code left behind)
                        busy -= 1
                        yield self._died(worker)
            deadline = min((w.deadline for w in self._workers), default=time.monotonic())
            wait = min(1.0, max(0.0, deadline - time.monotonic()))
            for key, _ in self._selector.select(timeout=wait):
                outcome = self._read(key.data)
                if outcome is not None:
                    busy -= 1
                    yield outcome
            now = time.monotonic()
            for worker in [w for w in self._workers if w.deadline <= now]:
                outcome = self._expire(worker)
                if outcome is not None:
                    busy -= 1
                    yield outcome

    def close(self, graceful: bool = True) -> None:
        """Stop all workers (closing stdin lets them exit; stragglers are killed)."""
        for worker in list(self._workers):
            self._remove(worker, graceful=graceful)

    def _fill(self, wanted: int) -> None:
        while len(self._workers) < min(self.jobs, wanted):
            worker = _Worker(self._init)
            self._selector.register(worker.proc.stdout, selectors.EVENT_READ, worker)
            self._workers.append(worker)

    def _read(self, worker: _Worker) -> Outcome | None:
        try:
            message = receive(worker.proc.stdout)
        except (EOFError, OSError):
            return self._died(worker)
        if worker.state == "starting":
            worker.state, worker.deadline = "idle", float("inf")
            self._failed_starts = 0
            return None
        index, elapsed = worker.index, worker.elapsed()
        worker.state, worker.index, worker.deadline = "idle", None, float("inf")
        return Outcome(index, "ok", message, elapsed)

    def _died(self, worker: _Worker) -> Outcome | None:
        index, state, elapsed = worker.index, worker.state, worker.elapsed()
        code = worker.proc.wait()
        tail = worker.tail()
        self._remove(worker)
        if state == "starting":
            self._startup_failed(f"exited with {_describe_exit(code)}", tail)
            return None
        return Outcome(index, "crash", f"the worker process died ({_describe_exit(code)}) while "
                                       f"running this target{_format_tail(tail)}", elapsed)

    def _expire(self, worker: _Worker) -> Outcome | None:
        index, state, elapsed = worker.index, worker.state, worker.elapsed()
        tail = worker.tail()
        self._remove(worker)
        if state == "starting":
            self._startup_failed(f"did not start within {STARTUP_TIMEOUT:.0f} s", tail)
            return None
        return Outcome(index, "timeout", f"timed out after {self.timeout:g} s (the worker was "
                                         f"killed; raise --timeout if it is just slow)"
                                         f"{_format_tail(tail)}", elapsed)

    def _startup_failed(self, why: str, tail: str) -> None:
        self._failed_starts += 1
        if self._failed_starts >= 2:
            raise GradsmithError(f"check: the isolated worker process {why}{_format_tail(tail)}; "
                                 "fix the environment, or run with --no-isolate")

    def _remove(self, worker: _Worker, graceful: bool = False) -> None:
        self._selector.unregister(worker.proc.stdout)
        self._workers.remove(worker)
        worker.stop(graceful)


class _Worker:
    def __init__(self, init: dict) -> None:
        fd, self.log_path = tempfile.mkstemp(prefix="gradsmith-worker-", suffix=".log")
        os.close(fd)
        env = dict(os.environ)
        package_root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root,
                                                          env.get("PYTHONPATH")]))
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "gradsmith.isolation.worker"],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=log, env=env, start_new_session=True)
        send(self.proc.stdin, init)
        self.state = "starting"
        self.deadline = time.monotonic() + STARTUP_TIMEOUT
        self.index: int | None = None
        self.log_offset = 0
        self.started = 0.0

    def assign(self, index: int, task: tuple, timeout: float) -> None:
        self.log_offset = os.path.getsize(self.log_path)
        self.index, self.state = index, "busy"
        self.started = time.monotonic()
        self.deadline = self.started + timeout
        send(self.proc.stdin, task)

    def elapsed(self) -> float:
        return time.monotonic() - self.started if self.state == "busy" else 0.0

    def tail(self) -> str:
        try:
            with open(self.log_path, "rb") as log:
                log.seek(self.log_offset)
                text = log.read().decode("utf-8", "replace")
        except OSError:
            return ""
        lines = [ln for ln in text.splitlines() if not ln.startswith("--- gradsmith task")]
        fatal = [i for i, ln in enumerate(lines) if ln.startswith("Fatal Python error")]
        if fatal:  # faulthandler: the innermost (user) frames come first; gradsmith's own
            # frames (the worker calling the check) say nothing about the user's bug.
            block = [ln for ln in lines[fatal[-1]:] if "/gradsmith/" not in ln
                     and "<frozen runpy>" not in ln]
            if "" in block[2:]:  # the traceback ends at the first blank line after it
                block = block[:block.index("", 2)]
            return "\n".join(block[:_TAIL_LINES])
        return "\n".join(lines[-_TAIL_LINES:])

    def stop(self, graceful: bool) -> None:
        if graceful and self.proc.poll() is None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        try:  # the whole process group: user code may have started children of its own
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
        try:
            os.unlink(self.log_path)
        except OSError:
            pass


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


def _format_tail(tail: str) -> str:
    return f"; its last output:\n{tail}" if tail.strip() else ""
