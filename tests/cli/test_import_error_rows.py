"""A target that cannot be imported still gets its own row (issue 18, invariant 2).

``gradsmith check f.py::A f.py::B`` on a file whose import fails (a missing dependency, an
exception at import) used to print rows named after the file alone, one per target but all
alike; a file found by walking a directory got one row for all its Functions. Now a named
target's row names it, and a walked file's rows name the Functions its syntax tree shows.
The CLI runs in a subprocess of its own session, bounded in time and killed by its group.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

HEADER = "import torch\nfrom torch.autograd import Function\n"
MISSING = "import gradsmith_h15_missing_dependency\n"
TWO_FUNCTIONS = """
class Scale(Function):
    @staticmethod
    def forward(ctx, x):
        return 2 * x

    @staticmethod
    def backward(ctx, g):
        return 2 * g


class Shift(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x + 1

    @staticmethod
    def backward(ctx, g):
        return g


class Helper:  # not a Function: no row
    pass
"""


def _write(path: Path, *parts: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(textwrap.dedent(p) for p in parts))
    return path


def _check(cwd: Path, *args: str, timeout: float = 300) -> tuple[int, dict]:
    """``python -m gradsmith check ARGS --format json`` in ``cwd``: (exit code, document)."""
    # -W, not PYTHONWARNINGS: a variable would be an environment the test run's warm template
    # was not started with, and the worker server a fresh interpreter instead of its fork.
    # os.environ, not the process's C environment, which a C library may have added to.
    proc = subprocess.Popen([sys.executable, "-W", "ignore", "-m", "gradsmith", "check", *args,
                             "--format", "json"], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=dict(os.environ),
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    assert out, err.decode("utf-8", "replace")
    return proc.returncode, json.loads(out)


def _rows(doc: dict) -> list[tuple[str, str, str | None]]:
    return [(r["name"], r["verdict"], r["error"]) for r in doc["results"]]


def test_each_named_target_of_a_file_that_fails_to_import_gets_its_own_row(tmp_path):
    _write(tmp_path / "f.py", HEADER, MISSING, TWO_FUNCTIONS)
    code, doc = _check(tmp_path, "f.py::Scale", "f.py::Shift", "--no-isolate")
    assert _rows(doc) == [("f.py::Scale", "fail", "import"), ("f.py::Shift", "fail", "import")]
    for result in doc["results"]:
        assert "No module named 'gradsmith_h15_missing_dependency'" in result["reason"]
    assert doc["summary"]["import_errors"] == 2 and doc["summary"]["failed"] == 2
    assert code == 2  # an import error exits 2, as before


def test_walked_file_that_fails_to_import_gets_a_row_per_function_it_defines(tmp_path):
    # An exception at import, after the classes: isolated (the default), as users run it.
    _write(tmp_path / "src" / "ops.py", HEADER, TWO_FUNCTIONS,
           "raise RuntimeError('broken at import time')\n")
    code, doc = _check(tmp_path, "src")
    assert _rows(doc) == [("src/ops.py::Scale", "fail", "import"),
                          ("src/ops.py::Shift", "fail", "import")]
    for result in doc["results"]:
        assert "RuntimeError: broken at import time" in result["reason"]
    assert doc["summary"]["import_errors"] == 2
    assert code == 2


def test_file_without_a_visible_function_keeps_one_row_for_the_file(tmp_path):
    # dyn.py makes its Function at run time (no class statement to find): one row for it;
    # ops.py beside it, with one class statement, gets that class's row.
    _write(tmp_path / "d" / "dyn.py", HEADER, MISSING,
           "Double = type('Double', (Function,), {})\n")
    _write(tmp_path / "d" / "ops.py", HEADER, MISSING,
           "class Scale(Function):\n    pass\n")
    code, doc = _check(tmp_path, "d", "--no-isolate")
    assert _rows(doc) == [("d/dyn.py", "fail", "import"), ("d/ops.py::Scale", "fail", "import")]
    assert doc["summary"]["import_errors"] == 2
    assert code == 2
