"""Real subprocess runs: the ``gradsmith`` console script and ``python -m gradsmith``."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest


def _run(cmd: list[str], cwd) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300)


def test_python_dash_m_json(write, snippets, tmp_path):
    write("ops.py", snippets.good, snippets.bad)
    # --no-compat here and below: the entry points are under test, not the deployment checks
    proc = _run([sys.executable, "-m", "gradsmith", "check", "ops.py::Cube", "--no-isolate",
                 "--no-compat", "--format", "json"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert [r["verdict"] for r in doc["results"]] == ["pass"]


@pytest.mark.skipif(shutil.which("gradsmith") is None, reason="console script not installed")
def test_console_script_isolated_failure_exit_1(write, snippets, tmp_path):
    write("ops.py", snippets.bad)
    proc = _run([shutil.which("gradsmith"), "check", "ops.py", "--jobs", "1", "--no-compat"],
                tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "ops.py::BadMatmul" in proc.stdout and "gradient-mismatch" in proc.stdout


def test_usage_error_exit_2_from_a_real_process(tmp_path):
    proc = _run([sys.executable, "-m", "gradsmith", "check", "nope.py"], tmp_path)
    assert proc.returncode == 2
    assert "no such file or directory" in proc.stderr and proc.stdout == ""
