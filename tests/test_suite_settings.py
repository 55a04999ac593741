"""The test command itself (issue 21): the README's and CI's are the same, they use both cores
with pytest-xdist, and every test process runs torch on one thread (conftest.py at the root)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import torch

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]


def _pytest_line(text: str) -> str:
    (line,) = [line for line in text.splitlines() if line.startswith("python -m pytest")]
    return line


def test_readme_and_ci_run_the_same_two_worker_command():
    readme = _pytest_line((ROOT / "README.md").read_text())
    ci = _pytest_line((ROOT / ".ci" / "run").read_text())
    assert ci.replace(" -p no:cacheprovider", "") == readme
    assert re.search(r" -n 2 --dist loadscope\b", readme), readme
    dev = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(req.startswith("pytest-xdist") for req in dev["dev"])


def test_this_process_and_its_children_use_one_torch_thread():
    threads = os.environ.get("OMP_NUM_THREADS")  # "1" unless whoever ran pytest chose
    assert threads is not None
    assert torch.get_num_threads() == int(threads)
    child = subprocess.run([sys.executable, "-c", "import torch; print(torch.get_num_threads())"],
                           capture_output=True, text=True, timeout=120)
    assert child.stdout.strip() == threads, child.stderr


def test_a_thread_count_set_by_the_caller_is_kept(pytester):
    pytester.makeconftest((ROOT / "conftest.py").read_text())
    pytester.makepyfile(test_threads=textwrap.dedent("""
        import os

        def test_threads():
            assert os.environ["OMP_NUM_THREADS"] == "3"
    """))
    env = dict(os.environ, OMP_NUM_THREADS="3")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                          cwd=pytester.path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr



def test_collection_writes_bytecode_even_when_the_caller_turned_it_off(pytester):
    # PYTHONDONTWRITEBYTECODE=1 (many CI images): each worker compiled and assertion-rewrote
    # every test module from source on every run; the suite writes bytecode while collecting,
    # and only then: user code a test imports from a temporary folder leaves none.
    pytester.makeconftest((ROOT / "conftest.py").read_text())
    pytester.makepyfile(helper_mod="VALUE = 1\n")
    pytester.makepyfile(test_cached=textwrap.dedent("""
        import importlib
        import sys

        import helper_mod

        def test_user_code_a_test_imports_leaves_no_bytecode(tmp_path, monkeypatch):
            assert sys.dont_write_bytecode  # the caller's setting, back after collection
            (tmp_path / "user_mod.py").write_text("X = 1\\n")
            monkeypatch.syspath_prepend(tmp_path)
            assert importlib.import_module("user_mod").X == helper_mod.VALUE
            assert not (tmp_path / "__pycache__").exists()
    """))
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                          cwd=pytester.path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    written = {p.name.split(".")[0]: p.name for p in (pytester.path / "__pycache__").iterdir()}
    assert "-pytest-" in written["test_cached"]  # the rewritten module, as pytest caches it
    assert "helper_mod" in written  # a plain module the test module imports
