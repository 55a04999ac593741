"""The warm template's process (private): ``python -m gradsmith.isolation.template_server
PARENT_PID CONTROL_FD [LISTENER_FD]``, started by :class:`gradsmith.isolation.template.Template`.

On the control socket it reads its set-up (modules to import, tasks to warm up for, the folder
it was started in), imports and warms up as a worker server would before its first task,
answers ``ready``, and then forks one worker server per request: the request brings the
server's environment, working directory and task-log folder, and four file descriptors (its
stdin and stdout pipes, its log, and a pipe for its exit status), and is answered with the
server's pid. The same requests come from other processes (pools of ``gradsmith check``
commands the caller started) on the listening socket, each told first the environment the
template has, to decide whether theirs fits. It is a child subreaper: when a server ends, what it left is killed first, then
its exit status is sent. When the control socket closes, or its parent dies, or on SIGTERM,
it kills every process below it and exits.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import socket
import sys

from gradsmith.isolation.processes import become_subreaper, die_with_parent, kill_below
from gradsmith.isolation.protocol import FrameReader, encode
from gradsmith.isolation.template import STATUS as _STATUS


def _serve(parent: int, control: socket.socket, listener: socket.socket | None) -> None:
    """Import and warm up as the request says, answer ``ready``, then fork a server per
    request until the control socket closes."""
    from gradsmith.isolation import worker

    setup = pickle.loads(_read_frame(control))
    before = dict(os.environ)
    from gradsmith._triton import prepare

    prepare()
    worker.preload(setup["modules"])  # as the server
    worker.warm_up(setup["warm"], setup["modules"])  # the servers warm up again, and show why
    path0 = setup["path0"]
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    os.set_blocking(wake_r, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    # What the start-up set itself (TRITON_INTERPRET by prepare(), TORCHINDUCTOR_CACHE_DIR by
    # the first compile): a fresh server sets the same, so its forks keep it unless the pool
    # has it (Template.fits then checks that the values agree).
    startup_env = {k: v for k, v in os.environ.items() if before.get(k) != v}
    control.sendall(encode(("ready", startup_env)))
    hello = encode(("hello", before, startup_env, setup.get("volatile", [])))
    servers: dict[int, int] = {}  # server pid -> the pipe its exit status goes to
    watched = [control, wake_r] + ([listener] if listener is not None else [])
    while True:
        try:
            readable = select.select(watched, [], [], 60.0)[0]
        except InterruptedError:
            readable = []
        if wake_r in readable:
            try:
                while os.read(wake_r, 4096):
                    pass
            except OSError:
                pass
        _reap(servers)
        own = (wake_r, wake_w, *servers.values())
        if control in readable and not _answer(control, control, listener, startup_env, path0,
                                               own, servers, worker.main):
            return
        if listener is not None and listener in readable:
            # a pool of another process (a ``gradsmith check`` a test started) that found the
            # address in GRADSMITH_WORKER_TEMPLATE: it is told the environment the template
            # has, and sends a request if its own fits, or closes
            try:
                conn = listener.accept()[0]
            except OSError:
                continue
            try:
                conn.settimeout(30.0)
                conn.sendall(hello)
                own = (wake_r, wake_w, *servers.values())
                _answer(conn, control, listener, startup_env, path0, own, servers, worker.main)
            except OSError:
                pass
            finally:
                conn.close()


def _answer(sock: socket.socket, control: socket.socket, listener: socket.socket | None,
            startup_env: dict[str, str], path0: str, own: tuple[int, ...],
            servers: dict[int, int], main) -> bool:
    """Fork a server for the request on ``sock`` and answer its pid; False at end of file."""
    message, fds, _, _ = socket.recv_fds(sock, 1 << 16, 4)
    if not message:
        for fd in fds:
            os.close(fd)
        return False
    if len(fds) != 4:
        for fd in fds:
            os.close(fd)
        raise OSError(f"a request with {len(fds)} file descriptors, not 4")
    request = _read_frame(sock, message)  # the rest of a large environment
    closing = [s for s in (control, listener, sock) if s is not None]
    pid = _fork_server(pickle.loads(request), startup_env, fds, path0, closing, own, main)
    servers[pid] = fds[3]
    sock.sendall(_STATUS.pack(pid))
    return True


def _fork_server(request: dict, startup_env: dict[str, str], fds: list[int], path0: str,
                 sockets: list[socket.socket], own: tuple[int, ...], main) -> int:
    """Fork one server; in the parent, close the fds the request brought but the status one.
    Its environment is the pool's, with what the template's start-up set where the pool has
    not set it: what a fresh server's own start-up would have set."""
    template = os.getpid()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        for fd in fds[:3]:
            os.close(fd)
        return pid
    try:  # the server: set up as ``python -m gradsmith.isolation.worker`` would be
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for sock in sockets:
            sock.close()
        for fd in (*own, fds[3]):
            os.close(fd)
        os.setsid()
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update({**startup_env, **request["env"]})
        if sys.path and sys.path[0] == path0:
            sys.path[0] = request["cwd"]
        # a relative PYTHONPATH entry is a folder below the working directory (made absolute
        # at start-up): below the pool's, as in a fresh server, not the template's
        for entry in request["env"].get("PYTHONPATH", "").split(os.pathsep):
            if entry and not os.path.isabs(entry):
                was = os.path.normpath(os.path.join(path0, entry))
                now = os.path.normpath(os.path.join(request["cwd"], entry))
                sys.path[:] = [now if os.path.normpath(p) == was else p for p in sys.path]
        # as ``python -m gradsmith.isolation.worker PARENT LOGS`` sets it
        sys.argv = [sys.modules[main.__module__].__file__, str(template), request["logs"]]
        os.dup2(fds[0], 0)
        os.dup2(fds[1], 1)
        os.dup2(fds[2], 2)
        for fd in fds[:3]:
            os.close(fd)
        main([str(template), request["logs"]])
    finally:
        os._exit(70)


def _reap(servers: dict[int, int]) -> None:
    """Reap what ended; for a server: kill what it left (adopted here), then send its status."""
    ended = {}
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
        if pid in servers:
            ended[pid] = status
    if ended:
        kill_below(keep=set(servers) - set(ended))
        for pid, status in ended.items():
            fd = servers.pop(pid)
            try:
                os.write(fd, _STATUS.pack(status))
            except OSError:
                pass
            os.close(fd)


def _read_frame(sock: socket.socket, start: bytes = b"") -> bytes:
    """One framed payload from the control socket (``start``: its first bytes, read already)."""
    reader = FrameReader()
    data = start
    while True:
        for payload in reader.feed(data):
            return payload
        data = sock.recv(1 << 16)
        if not data:
            raise EOFError("the caller closed the control socket")


def main(argv: list[str] | None = None) -> int:
    """Serve until the caller closes the control socket or dies; ends the process."""
    argv = sys.argv[1:] if argv is None else argv
    parent, control = int(argv[0]), socket.socket(fileno=int(argv[1]))
    listener = socket.socket(fileno=int(argv[2])) if len(argv) > 2 else None
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the caller's to handle

    def on_term(*_: object) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, on_term)
    die_with_parent(signal.SIGTERM, parent)
    become_subreaper()
    code = 0
    try:
        _serve(parent, control, listener)
    except (EOFError, BrokenPipeError, ConnectionError, SystemExit):
        pass
    except BaseException:  # a gradsmith bug: its traceback goes to the template's log
        import traceback

        traceback.print_exc()
        code = 70
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        kill_below()
        os._exit(code)


if __name__ == "__main__":
    raise SystemExit(main())
