"""Running the generated repro scripts as ``python SCRIPT`` would, without a torch import each.

Every repro script runs with plain PyTorch in a process of its own, and its first import is
torch: 1.5 CPU-s of the 2 each ``subprocess.run([python, script])`` cost (issue 21, the test
suite's CPU time). :func:`run_script` hands each script to one helper process instead, which
imported torch once (and nothing of gradsmith, with ``PYTHONPATH`` removed as the tests always
did) and runs the script in a fresh fork of itself, set up as ``python SCRIPT`` sets up a
process: ``sys.argv``, ``sys.path[0]`` (the script's folder), ``__main__``, the working
directory, stdin from ``/dev/null``, and its own stdout, stderr and exit status.
``test_the_runner_matches_a_fresh_interpreter`` compares the two on one script.

The helper is bounded in time like any process a test starts: a script that runs past its
limit fails its test, and the helper's process group (the helper and the fork) is killed by
its id; the helper is stopped the same way at the end of the session.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
from pathlib import Path

import pytest

HELPER = r'''
import json, os, runpy, sys, traceback

import torch  # noqa: F401 - every repro script's first import, paid once for all of them

for line in sys.stdin:
    request = json.loads(line)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            null = os.open(os.devnull, os.O_RDONLY)
            out = os.open(request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            err = os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            for fd, target in ((null, 0), (out, 1), (err, 2)):
                os.dup2(fd, target)
                os.close(fd)
            sys.stdin = open(0, closefd=False)
            os.chdir(request["cwd"])
            path = request["path"]
            sys.argv = [path]
            sys.path[0] = os.path.dirname(os.path.realpath(path))
            if request["block"]:  # an import of gradsmith fails loudly, even where installed
                sys.modules["gradsmith"] = None
            runpy.run_path(path, run_name="__main__")
            code = 0
        except SystemExit as end:  # as the interpreter maps sys.exit(...) to a status
            if end.code is None or isinstance(end.code, int):
                code = end.code or 0
            else:
                print(end.code, file=sys.stderr)
        except BaseException:
            traceback.print_exc()
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)
    _, status = os.waitpid(pid, 0)
    print(json.dumps(os.waitstatus_to_exitcode(status)), flush=True)
'''


class ScriptRunner:
    """Runs scripts in forks of one helper process (started on first use); see the module
    docstring."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.proc: subprocess.Popen | None = None
        self.count = 0

    def _start(self) -> subprocess.Popen:
        if self.proc is None or self.proc.poll() is not None:
            env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
            self.proc = subprocess.Popen([sys.executable, "-c", HELPER], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, text=True, env=env,
                                         start_new_session=True)
        return self.proc

    def __call__(self, path: Path, cwd: Path | None = None, block: bool = False,
                 timeout: float = 120) -> subprocess.CompletedProcess:
        """Run ``python PATH`` from ``cwd`` (default: this process's), gradsmith unimportable
        when ``block``; its exit status, stdout and stderr."""
        proc = self._start()
        self.count += 1
        out = self.folder / f"{self.count}.out"
        err = self.folder / f"{self.count}.err"
        request = {"path": str(path), "cwd": str(cwd or os.getcwd()), "block": block,
                   "stdout": str(out), "stderr": str(err)}
        proc.stdin.write(json.dumps(request) + "\n")
        proc.stdin.flush()
        with selectors.DefaultSelector() as selector:
            selector.register(proc.stdout, selectors.EVENT_READ)
            answered = selector.select(timeout)
        line = proc.stdout.readline() if answered else ""
        if not line:
            self.stop(kill=True)
            pytest.fail(f"python {path} did not finish within {timeout} s (or its runner "
                        f"died):\n{_read(out)}\n{_read(err)}")
        return subprocess.CompletedProcess([sys.executable, str(path)], json.loads(line),
                                           _read(out), _read(err))

    def stop(self, kill: bool = False) -> None:
        """Stop the helper: end of input (it ends once its fork has), or at once (``kill``,
        or when it lingers) its process group by id, while it is unreaped and the id its own."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if not kill:
            try:
                proc.stdin.close()
                proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                pass
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            try:
                pipe.close()
            except OSError:
                pass


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


@pytest.fixture(scope="session")
def run_script(tmp_path_factory):
    """``run_script(path, cwd=None, block=False)``: ``python PATH`` as a
    :class:`subprocess.CompletedProcess`, run in a fork of a helper that imported torch."""
    runner = ScriptRunner(tmp_path_factory.mktemp("script-output"))
    yield runner
    runner.stop()
