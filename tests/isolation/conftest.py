"""Helpers for the hostile-code tests: user files in tmp, bounded runs, process bookkeeping.

Every process these tests start is bounded in time and, if it outlives the test, killed by its
pid: the ``gradsmith check`` process a test started, and the pids that the test's own user code
recorded in a file. Nothing is ever killed by name.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

HEADER = """\
import os, sys, time
import torch
from torch.autograd import Function
import gradsmith

def _x():
    return (torch.randn(5, dtype=torch.float64, requires_grad=True),)

def record(name="", pid=None):
    with open(os.environ["GRADSMITH_TEST_PIDS"], "a") as handle:
        handle.write(f"{pid or os.getpid()} {name}\\n")
"""

# Correct Functions: each must pass wherever it runs.
SQUARE = """
@gradsmith.example(_x)
class Square(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 2 * x * grad
"""

EXP = """
@gradsmith.example(_x)
class Exp(Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.exp(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * y
"""

GOOD = SQUARE + "\n" + EXP


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2:][:1] != b"Z"


def children_of(pid: int) -> list[int]:
    """Direct children of ``pid``, from ``/proc`` (independent of gradsmith's own helper)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_bytes()
            except OSError:
                continue
            if int(stat[stat.rfind(b")") + 2:].split()[1]) == pid:
                found.append(int(entry))
    return found


def task_log(task_pid: int) -> str:
    """The log file of the task process ``task_pid``: its keeper (the parent) writes what the
    task prints there."""
    with open(f"/proc/{task_pid}/stat", "rb") as handle:
        stat = handle.read()
    keeper = int(stat[stat.rfind(b")") + 2:].split()[1])
    for fd in os.listdir(f"/proc/{keeper}/fd"):
        if int(fd) <= 2:  # its stdio is the server's
            continue
        try:
            target = os.readlink(f"/proc/{keeper}/fd/{fd}")
        except OSError:
            continue
        if target.endswith(".log") and "gradsmith-worker-" in target:
            return target
    raise AssertionError(f"no task log open in the keeper {keeper} of {task_pid}")


def wait_until(condition, timeout: float, step: float = 0.1) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(step)
    return condition()


def kill_if_alive(pids) -> None:
    for pid in pids:
        if alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


class Runner:
    """Runs ``python -m gradsmith ...`` from tmp, bounded in time; records pids to clean up."""

    def __init__(self, tmp_path: Path) -> None:
        self.cwd = tmp_path
        self.pid_file = tmp_path / "pids.txt"
        self.pid_file.touch()
        self.started: list[int] = []
        self.env = dict(os.environ, GRADSMITH_TEST_PIDS=str(self.pid_file))

    def popen(self, *args: str) -> subprocess.Popen:
        # Ctrl-C as a terminal delivers it: a test run started in the background of a
        # non-interactive shell (a CI script's `cmd &`) ignores SIGINT, every child inherits
        # that, and Python then never installs its KeyboardInterrupt handler, so the SIGINT
        # case of test_orphans waited out the task's 300 s timeout instead of testing Ctrl-C.
        proc = subprocess.Popen([sys.executable, "-m", "gradsmith", *map(str, args)],
                                cwd=self.cwd, env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, preexec_fn=_default_sigint)
        self.started.append(proc.pid)
        return proc

    def run(self, *args: str, timeout: float = 180) -> tuple[int, str, str]:
        proc = self.popen(*args)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(f"gradsmith {' '.join(args)} did not finish within {timeout} s:\n{err}")
        return proc.returncode, out, err

    def check(self, *args: str, timeout: float = 180) -> tuple[int, dict, str]:
        """``gradsmith check ARGS --format json``: (exit code, document, stderr)."""
        code, out, err = self.run("check", *args, "--format", "json", timeout=timeout)
        try:
            return code, json.loads(out), err
        except json.JSONDecodeError:
            pytest.fail(f"no JSON document (exit {code}):\n{out}\n{err}")

    def recorded(self) -> dict[int, str]:
        rows = [line.split(" ", 1) for line in self.pid_file.read_text().splitlines() if line]
        return {int(pid): name for pid, name in (r + [""] * (2 - len(r)) for r in rows)}

    def cleanup(self) -> None:
        kill_if_alive([*self.recorded(), *self.started])


@pytest.fixture
def runner(tmp_path):
    r = Runner(tmp_path)
    yield r
    r.cleanup()


@pytest.fixture
def write(tmp_path: Path):
    """``write(name, *bodies)`` writes a module (with :data:`HEADER`) to tmp."""

    def _write(name: str, *bodies: str, header: bool = True) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text((HEADER if header else "") + "".join(textwrap.dedent(b) for b in bodies))
        return path

    return _write


@pytest.fixture
def procs():
    """The process helpers above, by name (tests cannot import conftest in importlib mode)."""
    return SimpleNamespace(alive=alive, children_of=children_of, wait_until=wait_until,
                           kill_if_alive=kill_if_alive, task_log=task_log, good=GOOD, square=SQUARE)


# Tests of the server's own start and of what happens when the processes around it are killed
# or interrupted: their `gradsmith check` starts a fresh interpreter, never a fork of the test
# run's template (whose parent and clean-up differ; tests/isolation/test_template.py tests it).
FRESH_SERVERS = {"test_startup", "test_orphans", "test_interrupts", "test_worker_files",
                 "test_cuda_fork", "test_template",
                 "test_limits::test_the_startup_limit_is_an_option_and_the_wait_is_reported"}


@pytest.fixture(autouse=True)
def _servers(request, monkeypatch):
    """Elsewhere here, where a server's start is incidental (time limits, endings, listing,
    contamination: all inside the server), commands fork theirs from the test run's template
    (the root conftest.py)."""
    from gradsmith.isolation.template import ADDRESS_ENV, install

    module = request.module.__name__.rpartition(".")[2]
    if not {module, f"{module}::{request.function.__name__}"} & FRESH_SERVERS:
        request.getfixturevalue("warm_worker_template")
        yield
        return
    monkeypatch.delenv(ADDRESS_ENV, raising=False)
    previous = install(None)
    yield
    install(previous)


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
