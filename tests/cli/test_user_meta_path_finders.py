"""A user's import machinery sees the same lookups under gradsmith as under plain python.

A ``sitecustomize`` may install a finder on ``sys.meta_path`` that acts on the first lookup of a
module and then removes itself (a corpus environment restored NumPy's removed ``np.float``
alias this way: on the first ``find_spec("numpy")`` it patches the loader of the spec it
returns). gradsmith's startup asked ``importlib.util.find_spec("numpy")`` before anything
imported NumPy, which spent that lookup on a spec nobody loaded: the user's file imported under
``python`` and failed to import under ``gradsmith check`` (issue 18, corpus 5's part b). Now
gradsmith looks NumPy up on ``sys.path`` only. The CLI runs in a subprocess of its own session,
bounded in time and killed by its group.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

# One-shot finder: the first lookup of numpy gets a spec whose loader also sets a marker.
SITECUSTOMIZE = """
import importlib.abc
import importlib.util
import sys


class _OneShot(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name != "numpy":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec("numpy")
        exec_module = spec.loader.exec_module

        def patched(module):
            exec_module(module)
            module.restored_by_user_finder = True

        spec.loader.exec_module = patched
        return spec


sys.meta_path.insert(0, _OneShot())
"""

USER_FILE = """
import numpy
import torch

assert numpy.restored_by_user_finder  # what the user's environment provides


class Double(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return 2 * x

    @staticmethod
    def backward(ctx, g):
        return 2 * g
"""


def _run(cwd: Path, *cmd: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(cwd / "site"), os.environ.get("PYTHONPATH")) if p))
    proc = subprocess.Popen([sys.executable, *cmd], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_a_file_that_imports_under_python_imports_under_gradsmith_check(tmp_path):
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(textwrap.dedent(SITECUSTOMIZE))
    (tmp_path / "f.py").write_text(textwrap.dedent(USER_FILE))
    plain = _run(tmp_path, "-c", "import f")
    assert plain.returncode == 0, plain.stderr  # the reference: plain python imports it
    proc = _run(tmp_path, "-W", "ignore", "-m", "gradsmith", "check", "f.py::Double",
                "--no-compat", "--format", "json")
    doc = json.loads(proc.stdout)
    [row] = doc["results"]
    assert (row["verdict"], row["error"]) == ("pass", None), row.get("reason")
    assert proc.returncode == 0
