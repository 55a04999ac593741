"""stdout closed (``gradsmith ... | head``) or full (``> /dev/full``): no traceback.

A closed pipe ends the command quietly with 141 (128 + SIGPIPE, what a shell reports for a
command that SIGPIPE ended, like ``git log | head``); a full disk is one line on stderr and
exit 2. Each case runs the real console entry point in its own process group, bounded in time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from gradsmith.cli._output_errors import CLOSED_PIPE_EXIT

GOOD = '''
import torch
from torch.autograd import Function


class Cube(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 3 * x * x * grad
'''

# Enough findings that the output cannot fit in the first write.
LINTED = "".join(f'''
class F{i}(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.mul_(2)
        return x

    @staticmethod
    def backward(ctx, g):
        return g
''' for i in range(200))


def _run(args: list[str], cwd: Path, stdout, close_early: bool, timeout: float = 240):
    """Run ``python -m gradsmith ARGS`` with ``stdout``; with ``close_early`` the reading end
    of a pipe is closed before the command writes anything (what ``| head -0`` does)."""
    # -W, not PYTHONWARNINGS, and os.environ as it is (stdout is never a terminal here, so no
    # width applies): another environment would make `check`'s worker server a fresh
    # interpreter instead of a fork of the test run's warm template
    proc = subprocess.Popen([sys.executable, "-W", "ignore", "-m", "gradsmith", *args],
                            cwd=cwd, stdout=stdout, stderr=subprocess.PIPE,
                            env=dict(os.environ), start_new_session=True)
    if close_early:
        proc.stdout.close()
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    return proc.returncode, err.decode("utf-8", "replace")


def _closed(args, cwd):
    return _run(args, cwd, subprocess.PIPE, close_early=True)


def _full(args, cwd):
    with open("/dev/full", "w") as full:
        return _run(args, cwd, full, close_early=False)


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "good.py").write_text(GOOD)
    (tmp_path / "linted.py").write_text("import torch\n" + LINTED)
    return tmp_path


LINT = ["lint", "linted.py"]
EXPLAIN = ["lint", "--explain", "GS101"]
CHECK = ["check", "good.py", "--no-compat", "--timeout", "120", "--startup-timeout", "120"]


@pytest.mark.parametrize("args", [LINT, EXPLAIN, CHECK], ids=["lint", "explain", "check"])
def test_closed_pipe_exits_quietly_with_sigpipe_status(files: Path, args: list[str]) -> None:
    code, err = _closed(args, files)
    assert "Traceback" not in err and "BrokenPipe" not in err and "Exception ignored" not in err
    assert code == CLOSED_PIPE_EXIT == 128 + signal.SIGPIPE


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("args", [LINT, EXPLAIN, CHECK], ids=["lint", "explain", "check"])
def test_full_disk_is_one_line_and_exit_2(files: Path, args: list[str]) -> None:
    code, err = _full(args, files)
    lines = [line for line in err.splitlines()
             if line.strip() and "still working" not in line]  # a slow start says so
    assert code == 2, err
    assert len(lines) == 1, err
    assert "standard output" in lines[0] and "No space left on device" in lines[0]
