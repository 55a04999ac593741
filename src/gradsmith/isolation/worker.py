"""Worker server for isolated checks: ``python -m gradsmith.isolation.worker PARENT_PID [LOGS]``
(private; LOGS: the folder for the task logs, which ``gradsmith check`` removes).

One per ``gradsmith check`` run. It imports torch and the modules of the kinds of task it is
told of once (and their lazy imports with their ``warm_up``, once tasks queue up: see
:func:`gradsmith.isolation.task.task_module`) but never user code, answers ``ready``, and then runs
every task it is sent in a fresh fork (:mod:`.sandbox`), at most ``jobs`` at a time, each under
its own time limit. A fork starts from this clean state, so no verdict depends on what ran
before it, and starting one costs milliseconds instead of a torch import.

Messages (:mod:`.protocol`) on the original stdin/stdout:

- from ``gradsmith check``: ``{"sys_path", "jobs", "threads", "modules", "import_timeout"}``
  first (``import_timeout``: the limit of a task's import of the user's code), then
  ``("task", index, task, timeout)``; closing stdin ends the server;
- to ``gradsmith check``: ``("ready", pid)``; ``("started", index)``; ``("progress", index,
  bytes)`` and
  ``("result", index, bytes, elapsed)``, whose bytes are the task process's pickles,
  forwarded without unpickling; ``("started", index)`` again when the task's deployment
  checks begin: they get a time limit of their own (the parent's watchdog restarts too);
  forwarded without unpickling; ``("ended", index, kind, info, elapsed)`` when a task ended
  without a result, ``kind`` ``crash`` or ``timeout`` and ``info`` a dict with ``exit`` (how
  the task process ended) and ``tail`` (its last output).

When ``gradsmith check`` dies (stdin reaches end-of-file, or the parent-death signal arrives)
or the server is sent SIGTERM, it kills every process below it, whatever session they are in,
and exits: nothing started by a run outlives it.
"""

from __future__ import annotations

import faulthandler
import os
import pickle
import select
import shutil
import signal
import sys
import tempfile
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from gradsmith.isolation import sandbox
from gradsmith.isolation.processes import (
    become_subreaper,
    die_with_parent,
    kill_below,
    signal_quietly,
)
from gradsmith.isolation.protocol import FrameError, FrameReader, encode, write_all
from gradsmith.isolation.task import task_module
from gradsmith.isolation.tasklog import heap_aborted, log_tail

# A keeper that has not exited this long after SIGTERM is killed outright.
_KILL_GRACE = 5.0
# A task's pipe must reach end-of-file this soon after its keeper exited.
_EOF_GRACE = 2.0
# A task whose output has glibc's heap check aborting it is ended once its log has not grown
# for this long (the rest of a crash handler's backtrace), not waited out to its time limit.
_ABORT_QUIET = 2.0
# Deployment phases a task may restart its time limit for (a check task's deployment checks,
# gradsmith.checker.deploy's DEPLOY_MODULES: this runner knows nothing of them).
_DEPLOY_CLOCKS = 8
#: How many times ``--timeout`` a task whose Triton kernels run interpreted gets.
INTERPRETED_SCALE = 4


@dataclass
class _Task:
    index: int
    keeper: int
    fd: int
    log: str
    timeout: float
    started: float = field(default_factory=time.monotonic)  # of the current time limit
    launched: float = field(default_factory=time.monotonic)
    deploy_clocks: int = 0  # time limits restarted for deployment checks
    then: float | None = None  # importing: the limit once the user's code is imported
    interpreted: bool = False  # its Triton kernels run interpreted: the limit was scaled
    reader: FrameReader = field(default_factory=FrameReader)
    result: bytes | None = None
    status: int | None = None  # the task process's, from the keeper
    keeper_done: float | None = None
    eof: bool = False
    terminated: float | None = None  # when SIGTERM was sent (timeout)
    corrupt: bool = False
    aborted: bool = False  # glibc's heap check aborted it: ended early, not waited out
    log_size: int = -1  # the log's size when last looked at, and since when (abort watch)
    log_since: float = 0.0
    log_read: bool = False  # read since it last grew

    @property
    def deadline(self) -> float:
        if self.keeper_done is not None:
            return self.keeper_done + _EOF_GRACE
        if self.terminated is not None:
            return self.terminated + _KILL_GRACE
        return self.started + self.timeout


def _imports_first(task: tuple) -> bool:
    """Whether the task's module says its tasks import user code first (``IMPORTS_FIRST``)."""
    try:
        return bool(getattr(task_module(task[0]), "IMPORTS_FIRST", False))
    except Exception:  # noqa: BLE001 - an unknown kind fails in its task, with the reason
        return False


class Server:
    """The server's loop; see the module docstring."""

    def __init__(self, proto_in: int, proto_out: int, logs: str | None = None) -> None:
        self.proto_in, self.proto_out = proto_in, proto_out
        self.inbox = FrameReader()
        self.queue: deque[tuple[int, tuple, float]] = deque()
        self.running: dict[int, _Task] = {}  # by keeper pid
        self.jobs, self.threads = 1, 1
        # The task logs' folder: inside the one gradsmith check made, which removes it even
        # when this server is killed; a folder of its own when run alone.
        if logs is not None:
            os.makedirs(logs, exist_ok=True)
        self.logs = logs or tempfile.mkdtemp(prefix="gradsmith-worker-")
        self.spares: list[str] = []  # folders made when a task spoiled self.logs
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        os.set_blocking(self.wake_r, False)
        self.strays = False
        self.modules: list[str] = []  # to import before the first task (task kinds...)

    def configure(self) -> bool:
        """Read the first message (settings); False when the parent closed stdin first."""
        messages: list = []
        while not messages:
            data = os.read(self.proto_in, 1 << 16)
            if not data:
                return False
            messages = [pickle.loads(p) for p in self.inbox.feed(data)]
        init = messages[0]
        sys.path[:0] = [p for p in init.get("sys_path", []) if p not in sys.path]
        self.jobs = max(1, int(init.get("jobs", 1)))
        self.threads = max(1, int(init.get("threads", 1)))
        self.import_timeout = float(init.get("import_timeout", 0.0))
        self.modules = [m for m in init.get("modules", []) if isinstance(m, str)]
        self.queue.extend(m[1:] for m in messages[1:] if m[0] == "task")
        from gradsmith._triton import prepare

        prepare()  # once here (imports triton when installed), not in every task's fork
        return True

    def serve(self) -> None:
        """Run tasks until stdin closes."""
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(self.wake_w)
        self.send(("ready", os.getpid()))
        while True:
            # Before a task forks, not after: its time limit measures the user's code, never
            # torch's lazy imports or the first compile's set-up.
            self._warm_for_queue()
            while self.queue and len(self.running) < self.jobs:
                self._launch(*self.queue.popleft())
            if self.strays:
                self._kill_strays()
            now = time.monotonic()
            # At most a minute: select() rejects a wait as long as --timeout 1e308.
            wait = min([t.deadline for t in self.running.values()], default=now + 60) - now
            # While a task runs, look at its output every second (see _heap_aborted).
            wait = min(wait, 1.0 if self.running else 60.0)
            fds = [self.proto_in, self.wake_r] + [t.fd for t in self.running.values()
                                                  if not t.eof]
            try:
                readable = select.select(fds, [], [], max(0.0, wait))[0]
            except InterruptedError:
                readable = []
            if self.proto_in in readable and not self._read_parent():
                return
            if self.wake_r in readable:
                _drain(self.wake_r)
            for task in list(self.running.values()):
                if task.fd in readable:
                    self._read_task(task)
            self._reap()
            self._enforce(time.monotonic())

    def _warm_for_queue(self) -> None:
        """Call the ``warm_up`` of each kind of task queued, with the arguments of its tasks
        queued, once before they fork: what it pays for (imports, first-call set-up: seconds,
        tens of seconds on a loaded machine) every fork inherits, and no task's time limit
        pays for it. A kind whose module cannot be imported fails in its task instead."""
        warm_up(task for _, task, _ in self.queue)

    def _deploying(self, task: _Task) -> None:
        """A deployment check of the task begins: each gets ``timeout`` seconds of its own
        (compiling alone can take that on a loaded machine), at most one per deployment
        check, so a task still ends within ``timeout * (1 + len(DEPLOY_MODULES))``; the
        parent hears of it to restart its watchdog."""
        if task.deploy_clocks >= _DEPLOY_CLOCKS or task.terminated is not None:
            return
        task.deploy_clocks += 1
        task.started = time.monotonic()
        self.send(("started", task.index))

    def _imported(self, task: _Task) -> None:
        """The task imported the user's code: its own time limit (``--timeout``) starts now,
        and the parent hears of it to restart its watchdog."""
        if task.then is None or task.terminated is not None:
            return
        task.timeout, task.then = task.then, None
        task.started = time.monotonic()
        self.send(("started", task.index))

    def _interpreted(self, task: _Task) -> None:
        """The task's Triton kernels run in the interpreter, 20-500x slower than compiled:
        its time limit becomes ``INTERPRETED_SCALE`` times ``--timeout`` (once), and the
        parent hears by how much to move its watchdog."""
        if task.interpreted or task.terminated is not None:
            return
        task.interpreted = True
        extra = float(task.timeout * (INTERPRETED_SCALE - 1))
        task.timeout += extra
        self.send(("interpreted", task.index, extra))

    def _kill_strays(self) -> None:
        """Kill what a dead keeper kept, at once: the processes it left were adopted by this
        server (a subreaper; the kernel reparents them before the keeper's death can be
        reaped), so every child of the server that is not a running keeper goes, with all
        below it. Waiting until no task runs would leave them to the next attack: user code
        that kills the server too sends them to init."""
        self.strays = False
        kill_below(keep=set(self.running))

    def send(self, message: object) -> None:
        write_all(self.proto_out, encode(message))

    def shutdown(self) -> None:
        """Kill every process below the server and remove the task logs."""
        # The parent-death SIGTERM may come now, after the end-of-file that started this:
        # it must not cut the cleanup short.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        kill_below()
        while True:
            try:
                os.waitpid(-1, 0)
            except ChildProcessError:
                break
        for folder in (self.logs, *self.spares):
            shutil.rmtree(folder, ignore_errors=True)

    def _read_parent(self) -> bool:
        data = os.read(self.proto_in, 1 << 16)
        if not data:
            return False
        for payload in self.inbox.feed(data):
            message = pickle.loads(payload)
            if message[0] == "task":
                self.queue.append(message[1:])
        return True

    def _launch(self, index: int, task: tuple, timeout: float) -> None:
        self.send(("started", index))
        try:
            fd, log = tempfile.mkstemp(dir=self.logs, suffix=".log")
        except OSError:  # a task removed or spoiled the folder: the next must not pay for it
            try:
                os.makedirs(self.logs, exist_ok=True)
                fd, log = tempfile.mkstemp(dir=self.logs, suffix=".log")
            except OSError:  # replaced by a file: a folder of its own, removed at the end
                # beside it, in gradsmith check's folder (removed even if this server is
                # killed), unless that is gone too
                try:
                    spare = tempfile.mkdtemp(prefix="tasks-", dir=os.path.dirname(self.logs))
                except OSError:
                    spare = tempfile.mkdtemp(prefix="gradsmith-worker-")
                self.spares.append(spare)
                fd, log = tempfile.mkstemp(dir=self.spares[-1], suffix=".log")
        own = [self.proto_in, self.proto_out, self.wake_r, self.wake_w,
               *(t.fd for t in self.running.values() if not t.eof)]
        keeper, read_end = sandbox.start(task, threads=self.threads, log_fd=fd, close_fds=own)
        os.close(fd)
        # Importing the user's code is start-up, not the task's work: a task whose module
        # says so (IMPORTS_FIRST) has the start-up limit until it reports the import done
        # (listing a module is its import: all of it).
        first = max(timeout, self.import_timeout) if _imports_first(task) else timeout
        self.running[keeper] = _Task(index, keeper, read_end, log, first,
                                     then=timeout if first > timeout else None)

    def _read_task(self, task: _Task) -> None:
        try:
            data = os.read(task.fd, 1 << 16)
        except OSError:
            data = b""
        if not data:
            task.eof = True
            task.corrupt |= task.reader.pending > 0  # a frame cut short: not ours
            os.close(task.fd)
            return
        try:
            for payload in task.reader.feed(data):
                kind, body = payload[:1], payload[1:]
                if kind == sandbox.EVENT:
                    self.send(("progress", task.index, body))
                elif kind == sandbox.RESULT:
                    task.result = body
                elif kind == sandbox.EXIT:
                    task.status = sandbox.exit_status(payload)
                elif kind == sandbox.DEPLOY:
                    self._deploying(task)
                elif kind == sandbox.INTERPRETED:
                    self._interpreted(task)
                elif kind == sandbox.IMPORTED:
                    self._imported(task)
                else:
                    raise FrameError(f"a frame of unknown kind {kind!r}")
        except FrameError:  # user code wrote into gradsmith's pipe: end the task
            task.corrupt = True
            self._terminate(task)

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            task = self.running.get(pid)
            if task is not None:
                task.keeper_done = time.monotonic()
                if not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0):
                    self.strays = True  # the keeper died: what it kept is ours to kill
                    if task.status is None:
                        task.status = status
            # any other pid: an orphan adopted from a keeper that died

    def _enforce(self, now: float) -> None:
        for task in list(self.running.values()):
            if task.keeper_done is not None:
                if task.eof or now >= task.deadline:
                    self._finish(task, now)
            elif task.terminated is None and self._heap_aborted(task, now):
                task.aborted = True
                self._terminate(task)
            elif now >= task.deadline:
                if task.terminated is None:
                    self._terminate(task)
                else:  # the keeper did not clean up in time: kill it, strays later
                    signal_quietly(task.keeper, signal.SIGKILL)
                    self.strays = True

    @staticmethod
    def _heap_aborted(task: _Task, now: float) -> bool:
        """Whether ``task`` printed glibc's heap-check abort and its output has been quiet
        for ``_ABORT_QUIET`` s since: the process is dying, and a crash handler that hangs in
        the corrupted heap (cling's runs a debugger) would otherwise hold it to its time limit
        (30 s of nothing per row)."""
        try:
            size = os.path.getsize(task.log)
        except OSError:
            return False
        if size != task.log_size:
            task.log_size, task.log_since, task.log_read = size, now, False
            return False
        if task.log_read or now - task.log_since < _ABORT_QUIET:
            return False
        task.log_read = True  # read each quiet stretch once: the same bytes say the same
        return heap_aborted(task.log)[0] is not None

    def _terminate(self, task: _Task) -> None:
        if task.terminated is None:
            task.terminated = time.monotonic()
            signal_quietly(task.keeper, signal.SIGTERM)

    def _finish(self, task: _Task, now: float) -> None:
        del self.running[task.keeper]
        if not task.eof:
            os.close(task.fd)
        elapsed = now - task.launched
        if task.result is not None and task.terminated is None:
            self.send(("result", task.index, task.result, elapsed))
        else:
            kind = "timeout" if task.terminated is not None and not task.corrupt else "crash"
            how = sandbox.describe_end(task.status, corrupt=task.corrupt,
                                       killed=task.terminated is not None)
            tail = log_tail(task.log)
            if task.aborted and (line := heap_aborted(task.log)[0]) and line not in tail:
                tail = f"{line}\n...\n{tail}"  # glibc's message, above a long backtrace
            self.send(("ended", task.index, kind, {"exit": how, "tail": tail,
                                                   "interpreted": task.interpreted,
                                                   "aborted": task.aborted,
                                                   "importing": task.then is not None,
                                                   "limit": task.timeout}, elapsed))
        try:
            os.unlink(task.log)
        except OSError:
            pass


def preload(modules: Iterable[str]) -> None:
    """Import torch (one thread: no thread pool to fork with; each task sets its own) and what
    every task would import (its kind's module...), before the first fork."""
    import torch

    torch.set_num_threads(1)
    for kind in modules:
        try:
            task_module(kind)
        except Exception:  # noqa: BLE001 - shown, with context, by its tasks
            pass


def warm_up(tasks: Iterable[tuple], kinds: Iterable[str] = ()) -> None:
    """Call the ``warm_up`` of each kind of ``tasks`` with the arguments of its tasks (and of
    each of ``kinds`` with none: its common part). A kind whose module cannot be imported
    fails in its task instead."""
    by_kind: dict[object, list[tuple]] = {}
    for task in tasks:
        by_kind.setdefault(task[0], []).append(task[1:])
    for kind in kinds:
        by_kind.setdefault(kind, [])
    for kind, args in by_kind.items():
        try:
            hook = getattr(task_module(kind), "warm_up", None)
            if hook is not None:
                hook(args)
        except Exception:  # noqa: BLE001 - shown, with context, by the task itself
            pass


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except (BlockingIOError, OSError):
        pass


def main(argv: list[str] | None = None) -> int:
    """Run the server until stdin closes or SIGTERM; ends the process (exit code 0)."""
    argv = sys.argv[1:] if argv is None else argv
    parent = int(argv[0]) if argv else os.getppid()
    logs = argv[1] if len(argv) > 1 else None
    proto_in, proto_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(2, 1)  # stray prints land in the log, never in the protocol stream
    os.set_inheritable(proto_in, False)
    os.set_inheritable(proto_out, False)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for gradsmith check to handle

    def on_term(*_: object) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, on_term)
    die_with_parent(signal.SIGTERM, parent)
    become_subreaper()
    faulthandler.enable(file=sys.stderr)
    server = Server(proto_in, proto_out, logs)
    code = 0
    try:
        if not server.configure():
            return 0
        preload(server.modules)
        server.serve()
    except (BrokenPipeError, SystemExit):
        pass
    except BaseException:  # a gradsmith bug: its traceback goes to the log the row shows
        import traceback

        traceback.print_exc()
        code = 70
    finally:
        while True:  # the parent-death SIGTERM can come with the end of file, before
            try:     # shutdown() ignores it: then its SystemExit must not skip the cleanup
                server.shutdown()
                break
            except SystemExit:
                continue
        os._exit(code)  # skip the interpreter's teardown (torch's takes a second)


if __name__ == "__main__":
    raise SystemExit(main())
