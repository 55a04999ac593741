"""Processes and the machine they run on, for the worker (private; Linux features, portable
fallbacks): CPUs and memory available, and control of whole process trees.

User code can start processes of its own, even in a new session (``start_new_session=True``),
which escapes a process-group kill. Two Linux mechanisms make every such process findable:

- a *child subreaper* (``PR_SET_CHILD_SUBREAPER``) adopts the orphaned descendants of its
  children, so a descendant whose parent died is still below it instead of below ``init``;
- a *parent-death signal* (``PR_SET_PDEATHSIG``) tells a process that its parent died, so a
  worker learns at once that ``gradsmith check`` was killed (SIGKILL cannot be caught).

:func:`kill_below` then kills every living descendant, and looks again until two looks in a
row find none (a process killed while forking leaves an orphan that the subreaper adopts).
Nothing is ever stopped with SIGSTOP, so a cleanup cut short leaves no stopped process. On other systems the prctl calls do
nothing and the pipes' end-of-file still tells a worker that its parent is gone.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from pathlib import Path

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_libc = None


def _prctl(option: int, value: int) -> bool:
    global _libc
    if not sys.platform.startswith("linux"):
        return False
    try:
        if _libc is None:
            import ctypes

            _libc = ctypes.CDLL(None, use_errno=True)
        return _libc.prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


_adopting_pid = 0


def become_subreaper() -> bool:
    """Adopt orphaned descendants (Linux); True when it took effect."""
    global _adopting_pid
    if not _prctl(_PR_SET_CHILD_SUBREAPER, 1):  # called in every process: a fork inherits
        return False                             # this module's state, not the property
    _adopting_pid = os.getpid()
    return True


def adopting() -> bool:
    """True when this process made itself a subreaper (:func:`become_subreaper`)."""
    return _adopting_pid == os.getpid()


def die_with_parent(sig: int, parent: int) -> None:
    """Receive ``sig`` when the parent process dies; exit at once if it is already gone.

    Args:
        sig: signal to receive (SIGKILL for a process that runs user code, SIGTERM for one
            whose handler cleans up).
        parent: the pid the parent had when this process was started.
    """
    _prctl(_PR_SET_PDEATHSIG, int(sig))
    if os.getppid() != parent:  # it died before the prctl call took effect
        os.kill(os.getpid(), sig)


def children(parent: int) -> set[int]:
    """Pids of the processes whose parent is ``parent`` (from ``/proc``)."""
    return set(_process_table()[0].get(parent, []))


def descendants(root: int, keep: Collection[int] = ()) -> set[int]:
    """Pids of every living process below ``root`` (from the parent links in ``/proc``),
    except those in ``keep`` and everything below them; zombies are left out."""
    children, dead = _process_table()
    found: set[int] = set()
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in found and child not in keep:
                found.add(child)
                stack.append(child)
    return found - dead


def _process_table() -> tuple[dict[int, list[int]], set[int]]:
    """``({parent: [children]}, zombies)`` from ``/proc``."""
    children: dict[int, list[int]] = {}
    dead: set[int] = set()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return children, dead
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:  # exited meanwhile
            continue
        # "pid (comm) state ppid ...": comm may contain spaces and parentheses.
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(int(entry))
            if fields[0] in (b"Z", b"X"):
                dead.add(int(entry))
    return children, dead


def kill_below(keep: Collection[int] = (), limit: float = 30.0) -> set[int]:
    """SIGKILL every living process below this one, except ``keep`` and what is below them,
    until none is left; return their pids.

    Meant for a child subreaper (:func:`become_subreaper`): a process killed while it forked
    leaves a child that this process adopts, so the next look finds it, and the looks go on
    until two in a row find nothing alive. Nothing is ever stopped (SIGSTOP): a cleanup cut
    short, by a kill from outside or a time limit, would leave stopped processes to ``init``
    for good. What this process is the parent of is reaped, except ``keep``.

    Args:
        keep: pids to spare, with everything below them (the server's running keepers).
        limit: seconds after which the cleanup gives up (a process stuck in the kernel).
    """
    me = os.getpid()
    victims: set[int] = set()
    quiet = 0
    end = time.monotonic() + limit
    while quiet < 2 and time.monotonic() < end:
        found = descendants(me, keep)
        if not found:
            quiet += 1
            time.sleep(0.005)
            continue
        quiet = 0
        for pid in found:
            signal_quietly(pid, signal.SIGKILL)
        victims |= found
        time.sleep(0.001)  # let the kernel deliver them before looking again
        for pid in children(me) - set(keep):
            _reap_quietly(pid)
    for pid in children(me) - set(keep):
        _reap_quietly(pid)
    return victims


def _reap_quietly(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:  # not ours to reap (a Popen reaps its own), or gone
        pass


@contextmanager
def sigint_watch() -> Iterator[list[int]]:
    """A list that gets an entry when a real SIGINT (Ctrl-C) arrives meanwhile, so that a
    ``KeyboardInterrupt`` raised by user code running in this process can be told from one.
    The handler in place still runs (and raises); outside the main thread, or when SIGINT has
    no Python handler, the list stays empty: a ``KeyboardInterrupt`` comes from user code."""
    seen: list[int] = []
    previous = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or not callable(previous):
        yield seen
        return

    def on_sigint(signum: int, frame: object) -> None:
        seen.append(signum)
        previous(signum, frame)

    signal.signal(signal.SIGINT, on_sigint)
    try:
        yield seen
    finally:
        signal.signal(signal.SIGINT, previous)


def signal_quietly(pid: int, sig: int) -> None:
    """``os.kill(pid, sig)``, ignoring a process that is already gone."""
    try:
        os.kill(pid, sig)
    except OSError:  # already gone
        pass


def usable_cpus() -> int:
    """CPUs this process may run on (affinity mask, and a container's cgroup quota)."""
    try:
        count = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        count = os.cpu_count() or 1
    try:  # a container's CPU quota (cgroup v2): "max 100000" or "200000 100000"
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()
        if quota != "max":
            count = min(count, max(1, int(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    return max(1, count)


def available_memory() -> int | None:
    """Bytes of memory available to new processes (``MemAvailable``, within a container's
    cgroup limit); ``None`` where the system does not say."""
    try:
        with open("/proc/meminfo") as handle:
            info = dict(line.split(":", 1) for line in handle)
        available = int(info["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        return None
    try:  # a container's memory limit (cgroup v2)
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit != "max":
            used = int(Path("/sys/fs/cgroup/memory.current").read_text())
            available = min(available, int(limit) - used)
    except (OSError, ValueError):
        pass
    return max(0, available)


def describe_exit(status: int) -> str:
    """``exit code N`` or ``signal SIGSEGV`` for a :func:`os.waitpid` status.

    Example:
        >>> describe_exit(9 << 8)
        'exit code 9'
    """
    return describe_returncode(os.waitstatus_to_exitcode(status))


def describe_returncode(code: int) -> str:
    """``exit code N`` or ``signal SIGKILL`` for a returncode (negative: killed by a signal),
    as :attr:`subprocess.Popen.returncode` and :func:`os.waitstatus_to_exitcode` give it.

    Example:
        >>> describe_returncode(-9)
        'signal SIGKILL'
    """
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"
