"""A warm template of the worker server (private): one process that imported torch and the task
modules and ran their warm-up once, and forks a ready worker server for each
:class:`~gradsmith.isolation.pool.WorkerPool` of its caller, instead of each pool starting a
fresh interpreter (1.5-4 CPU-s each: ``import torch`` and the warm-up; a fork: milliseconds).

It is for a program that runs many short ``gradsmith check`` sessions in one process, such as a
test suite: it starts a :class:`Template` and :func:`install`\\ s it, and every pool started in
that process afterwards, whose server would get the same environment, forks its server from the
template. A forked server is the server :mod:`.worker` runs in a fresh interpreter, started
from the state that interpreter reaches before its first task: the same modules imported and
warmed up, the pool's working directory, environment, ``sys.path`` and ``sys.argv``, a session
of its own, and the same protocol on two pipes to the pool. Two things differ, both handled:

- its parent is the template, not the pool's process: the template is a child subreaper, so
  whatever a dead server leaves is adopted and killed by the template before the pool hears
  the server's exit status (over a pipe of its own; the pool cannot wait for a process that is
  not its child), as ``gradsmith check`` kills what it adopted;
- it dies with the template (its parent-death signal), and the template with its caller
  (end of file on its control socket, and its own parent-death signal): a killed caller leaves
  nothing behind, as with a fresh server.

Where the environment differs (beyond the ``volatile`` variables the installer names, which
the fork takes from the pool), the pool starts a fresh interpreter as before: torch read the
environment when the template imported it. Variables the template's own start-up set
(``TRITON_INTERPRET`` by :func:`gradsmith._triton.prepare`, ``TORCHINDUCTOR_CACHE_DIR`` by the
first compile) may be missing in the pool's environment, or have the same value: a fresh
server sets them the same way, and the fork gets them. The same CUDA rule as the server's
applies: the template never initialises CUDA (``PYTORCH_NVML_BASED_CUDA_CHECK``), so its forks
can. A template installed before it started starts in the first pool that needs it, within
its own ``startup_timeout`` (that pool's ``on_wait`` is not called meanwhile); one that cannot
start is uninstalled, and that pool starts a fresh interpreter.

This module is the caller's side; the template process is :mod:`.template_server`.
"""

from __future__ import annotations

import os
import pickle
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

from gradsmith._errors import GradsmithError
from gradsmith.isolation.protocol import FrameReader, encode, frame

# Set by torch in the caller's own environment, and again before each use, to a value of the
# process using it (Inductor's C++ wrapper: an address): whatever a server inherits is unused.
_TORCH_SETS_BEFORE_USE = frozenset({"_TORCHINDUCTOR_PYOBJECT_TENSOR_DATA_PTR"})
#: Where pools of other processes (``gradsmith check`` commands a test suite starts) find a
#: template to fork their server from: its :attr:`Template.address`, set by whoever runs them.
ADDRESS_ENV = "GRADSMITH_WORKER_TEMPLATE"
#: How the template sends a server's exit status (a wait status) to its pool.
STATUS = struct.Struct("!i")
_current: Template | None = None


def server_env() -> dict[str, str]:
    """The environment a worker server runs in: the caller's, gradsmith importable (its
    package folder first on ``PYTHONPATH``), CUDA asked about through NVML only (the server
    forks every task: initialising CUDA there would poison every fork)."""
    env = dict(os.environ)
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    env.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    return env


def install(template: Template | None) -> Template | None:
    """Make ``template`` the one every :class:`~gradsmith.isolation.pool.WorkerPool` started in
    this process forks its server from (``None``: none, each starts a fresh interpreter);
    return the one installed before."""
    global _current
    previous, _current = _current, template
    return previous


def installed() -> Template | None:
    """The template :func:`install` made current, started now if it was not (a template that
    cannot start is uninstalled: each pool starts a fresh interpreter, and says why if that
    fails too); None when there is none or it has stopped."""
    if _current is not None and _current.lazy:
        try:
            _current.start()
        except GradsmithError:
            install(None)
            return None
    if _current is not None and _current.running():
        return _current
    return None


class Template:
    """The caller's side of a template process; a context manager (stopped on exit).

    Args:
        modules: modules the template imports (the task kinds of the pools it serves, and what
            they use), as :class:`~gradsmith.isolation.pool.WorkerPool`'s ``modules``.
        warm: tasks whose kinds' ``warm_up`` the template calls with them, as a server does
            for its queue before the first fork (an empty list warms a kind's common part).
        volatile: environment variables that may differ between the template's start and a
            pool's (the fork takes the pool's values); any other difference means a fresh
            interpreter. Name only variables torch and gradsmith do not read at import.
        startup_timeout: seconds the template may take to import torch and warm up.

    Its environment, working directory and the interpreter it runs are the caller's when it is
    made; :func:`install` one not started to have it started by the first pool that needs it.
    """

    def __init__(self, modules: Iterable[str] = (), warm: Iterable[tuple] = (),
                 volatile: Iterable[str] = (), startup_timeout: float = 120.0) -> None:
        self.modules = [str(m) for m in modules]
        self.warm = [tuple(t) for t in warm]
        self.volatile = frozenset(volatile) | _TORCH_SETS_BEFORE_USE | {ADDRESS_ENV}
        self.startup_timeout = startup_timeout
        self.env = server_env()
        self.cwd = os.getcwd()
        self.pid = 0
        # where other processes reach it (a socket in a folder only this user can enter)
        self._folder = tempfile.mkdtemp(prefix="gradsmith-template-")
        self.address = os.path.join(self._folder, "template.sock")
        self.lazy = True  # not started yet
        self.own: dict[str, str] = {}  # what its start-up set in its environment
        self._proc: subprocess.Popen | None = None
        self._control: socket.socket | None = None

    def __enter__(self) -> Template:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        """Start the template and wait until it is ready.

        Raises:
            GradsmithError: it exited or did not answer within ``startup_timeout``.
        """
        if not self.lazy:
            return
        self.lazy = False
        log = os.path.join(self._folder, "template.log")
        mine, theirs = socket.socketpair()
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(self.address)
            listener.listen(16)
            with open(log, "wb") as err:
                self._proc = subprocess.Popen(
                    [sys.executable, "-m", "gradsmith.isolation.template_server",
                     str(os.getpid()), str(theirs.fileno()), str(listener.fileno())],
                    stdin=subprocess.DEVNULL, stdout=err, stderr=err, env=self.env,
                    cwd=self.cwd, pass_fds=(theirs.fileno(), listener.fileno()),
                    start_new_session=True)
        finally:
            theirs.close()
            listener.close()
        self._control = mine
        mine.sendall(encode({"modules": self.modules, "warm": self.warm,
                             "path0": self.cwd, "volatile": sorted(self.volatile)}))
        answer = _answer(mine, time.monotonic() + self.startup_timeout)
        if not (isinstance(answer, tuple) and answer[0] == "ready"):
            tail = Path(log).read_text(errors="replace")[-2000:]
            self.close()
            raise GradsmithError(f"worker template: it did not start within "
                                 f"{self.startup_timeout:g} s; its output:\n{tail}")
        self.pid = self._proc.pid
        self.own = answer[1]

    @classmethod
    def attach(cls, address: str) -> Template | None:
        """The template listening at ``address`` (another process's), for one :meth:`spawn`;
        None when none answers there. :meth:`close` it after use (it stops nothing)."""
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.settimeout(30.0)
            conn.connect(address)
            hello = _answer(conn, time.monotonic() + 30.0)
        except OSError:
            hello = None
        if not (isinstance(hello, tuple) and len(hello) == 4 and hello[0] == "hello"):
            conn.close()
            return None
        attached = cls.__new__(cls)
        attached.__dict__.update(
            modules=[], warm=[], env=hello[1], own=hello[2], volatile=frozenset(hello[3]),
            startup_timeout=0.0, cwd="", pid=0, address=address, lazy=False, _proc=None,
            _control=conn, _folder="")
        return attached

    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def fits(self, env: dict[str, str]) -> bool:
        """Whether a server with environment ``env`` can be forked from this template."""
        keys = (set(env) | set(self.env)) - self.volatile
        return all(env.get(k) == self.env.get(k)
                   or k in self.own and env.get(k) == self.own[k] for k in keys)

    def spawn(self, env: dict[str, str], logs: str, stderr: int) -> ForkedServer:
        """Fork a worker server for the caller, which talks to it as to
        ``python -m gradsmith.isolation.worker``: over the returned handle's pipes.

        Args:
            env: its environment (:meth:`fits` it).
            logs: the folder for its task logs (the worker's ``LOGS`` argument).
            stderr: the file descriptor of its log.

        Raises:
            OSError: the template is gone.
        """
        to_server, from_server, status = os.pipe(), os.pipe(), os.pipe()
        theirs = [to_server[0], from_server[1], stderr, status[1]]
        try:
            request = pickle.dumps({"env": env, "cwd": os.getcwd(), "logs": logs})
            socket.send_fds(self._control, [frame(request)], theirs)
            answer = self._control.recv(STATUS.size)
            if len(answer) != STATUS.size:
                raise OSError("the worker template is gone")
        except BaseException:
            for fd in (to_server[1], from_server[0], status[0]):
                os.close(fd)
            raise
        finally:
            for fd in (to_server[0], from_server[1], status[1]):
                os.close(fd)
        return ForkedServer(STATUS.unpack(answer)[0], to_server[1], from_server[0], status[0])

    def close(self) -> None:
        """Stop the template; it kills every process below it (its servers and theirs)."""
        proc, self._proc = self._proc, None
        self.lazy = False  # never started again
        if self._control is not None:
            self._control.close()
            self._control = None
        if proc is not None:
            for sig, wait in ((None, 10.0), (signal.SIGKILL, None)):
                if sig is not None:
                    proc.send_signal(sig)
                try:
                    proc.wait(timeout=wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        if _current is self:
            install(None)
        if self._folder:
            shutil.rmtree(self._folder, ignore_errors=True)


def _answer(sock: socket.socket, deadline: float) -> object:
    """The template's first message, or None (it exited, or the deadline passed)."""
    reader = FrameReader()
    while select.select([sock], [], [], max(0.0, deadline - time.monotonic()))[0]:
        try:
            data = sock.recv(1 << 16)
        except OSError:
            return None
        if not data:
            return None
        for payload in reader.feed(data):
            return pickle.loads(payload)
    return None


class ForkedServer:
    """A server forked by the template, seen from the pool as the ``subprocess.Popen`` of a
    fresh one (the parts the pool uses): ``pid``, ``stdin``, ``stdout``, ``returncode``,
    ``poll``, ``wait``, ``send_signal``. Its exit status comes from the template, which reaps
    it, once what it left behind is killed."""

    def __init__(self, pid: int, stdin: int, stdout: int, status: int) -> None:
        self.pid = pid
        self.stdin = open(stdin, "wb", buffering=0)  # noqa: SIM115 - closed by the pool
        self.stdout = open(stdout, "rb", buffering=0)  # noqa: SIM115 - closed by the pool
        self.returncode: int | None = None
        self._status = status

    def poll(self) -> int | None:
        return self.wait(0.0, raising=False)

    def wait(self, timeout: float | None = None, raising: bool = True) -> int | None:
        if self.returncode is not None:
            return self.returncode
        if select.select([self._status], [], [], timeout)[0]:
            data = os.read(self._status, STATUS.size)
            os.close(self._status)
            # no status: the template itself died, and took its servers with it
            self.returncode = (os.waitstatus_to_exitcode(STATUS.unpack(data)[0])
                               if len(data) == STATUS.size else -signal.SIGKILL)
            return self.returncode
        if raising:
            raise subprocess.TimeoutExpired(f"worker server {self.pid}", timeout)
        return None

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:  # until the template reaped it, the pid is the server's
            try:
                os.kill(self.pid, sig)
            except OSError:
                pass

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)
