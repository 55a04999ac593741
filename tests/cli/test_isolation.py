"""Isolated runs: a crash, a hang or an import-time crash is one failed row, never the end."""

from __future__ import annotations

import json

import pytest

from gradsmith.isolation.pool import WorkerPool


def test_crash_hang_and_import_crash_become_failed_rows_and_the_rest_still_runs(
        write, snippets, gradsmith_cli):
    # One session for all three (each worker start imports torch: seconds on a busy machine).
    write("ops.py", snippets.good, snippets.aborts, snippets.hangs)
    # a file that may hold a Function (one without is not imported at all)
    write("dies.py", "import os\nfrom torch.autograd import Function\nos.abort()\n",
          header=False)
    # --no-compat: compiling takes seconds a loaded machine stretches past this short limit.
    code, out, _ = gradsmith_cli(".", "--timeout", "5", "--jobs", "2", "--format", "json",
                                 "--no-compat")
    rows = {r["name"]: r for r in json.loads(out)["results"]}
    assert set(rows) == {"dies.py", "ops.py::Cube", "ops.py::Aborts", "ops.py::Hangs"}
    assert code == 2  # the import error decides the exit code
    assert rows["ops.py::Cube"]["verdict"] == "pass", rows["ops.py::Cube"]["reason"]
    crash = rows["ops.py::Aborts"]
    assert (crash["verdict"], crash["error"]) == ("fail", "crash")
    assert "SIGABRT" in crash["reason"] and "ops.py" in crash["reason"]  # faulthandler frames
    hang = rows["ops.py::Hangs"]
    assert (hang["verdict"], hang["error"]) == ("fail", "timeout")
    assert "timed out after 5 s" in hang["reason"] and "--timeout" in hang["reason"]
    dies = rows["dies.py"]
    assert (dies["verdict"], dies["error"]) == ("fail", "import") and "SIGABRT" in dies["reason"]


def test_pool_rejects_bad_jobs():
    with pytest.raises(Exception, match=r"jobs must be >= 1, got 0"):
        WorkerPool(jobs=0)
