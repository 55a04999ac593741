"""``[tool.gradsmith.check]`` in pyproject.toml: read, validated, and overridden by the
command line (command line > pyproject > built-in default)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

# Backward off by a factor of 2: a gradient-mismatch when judged, a gradient-quality finding
# when measured (approximate).
HALF_GRAD = """
@gradsmith.example(lambda: (torch.randn(5, dtype=torch.float64, requires_grad=True),))
class HalfGrad(Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad
"""

# Records the id of the process that runs it, to tell isolated from in-process runs.
WHERE = """
import os

@gradsmith.example(lambda: (torch.randn(3, dtype=torch.float64, requires_grad=True),))
class Where(Function):
    @staticmethod
    def forward(ctx, x):
        with open(os.path.join(os.path.dirname(__file__), "pid.txt"), "w") as f:
            f.write(str(os.getpid()))
        return x * 1

    @staticmethod
    def backward(ctx, grad):
        return grad
"""


@pytest.fixture
def pyproject(tmp_path):
    def _write(body: str, folder=None):
        path = (folder or tmp_path) / "pyproject.toml"
        path.write_text(body)
        return path

    return _write


def _verdicts(out: str) -> dict[str, str]:
    return {r["name"]: r["verdict"] for r in json.loads(out)["results"]}


def test_unknown_key_is_an_error_naming_it_and_the_valid_ones(pyproject, gradsmith_cli):
    pyproject("[tool.gradsmith.check]\ntimout = 60\n")
    code, out, err = gradsmith_cli()
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert "unknown key 'timout' in [tool.gradsmith.check]" in line
    assert ("valid keys: approximate, compat, ignore, isolate, jobs, require, select, "
            "startup-timeout, targets, timeout" in line)


def test_unknown_table_is_an_error(pyproject, gradsmith_cli):
    pyproject("[tool.gradsmith.chek]\ntimeout = 60\n")
    code, _, err = gradsmith_cli()
    assert code == 2
    assert "unknown table [tool.gradsmith.chek]" in err and "[tool.gradsmith.check]" in err


@pytest.mark.parametrize("line, words", [
    ('timeout = "60"', ["timeout must be a positive number of seconds", "'60'"]),
    ("timeout = -1", ["timeout must be a positive number", "-1"]),
    ("startup-timeout = 0", ["startup-timeout must be a positive number of seconds", "0"]),
    ("jobs = 0", ["jobs must be an integer >= 1", "got 0"]),
    ("jobs = true", ["jobs must be an integer >= 1", "True"]),
    ('isolate = "no"', ["isolate must be true or false", "'no'"]),
    ("compat = 0", ["compat must be true or false", "got 0"]),
    ("targets = []", ["targets must be a non-empty list"]),
    ("targets = [1]", ["targets must be a non-empty list"]),
])
def test_bad_values_are_errors_naming_key_value_and_a_valid_example(pyproject, gradsmith_cli,
                                                                     line, words):
    pyproject(f"[tool.gradsmith.check]\n{line}\n")
    code, _, err = gradsmith_cli()
    assert code == 2
    assert all(w in err for w in words), err
    assert "e.g. " in err


def test_unreadable_toml_is_an_error(pyproject, gradsmith_cli):
    pyproject("[tool.gradsmith.check\n")
    code, _, err = gradsmith_cli()
    assert code == 2 and "cannot read" in err and "pyproject.toml" in err


def test_targets_are_relative_to_the_pyproject_and_found_from_a_subdirectory(
        write, snippets, pyproject, gradsmith_cli, tmp_path, monkeypatch):
    write("ops/good.py", snippets.good)
    pyproject('[tool.gradsmith.check]\ntargets = ["ops/good.py"]\nisolate = false\n')
    (tmp_path / "deep" / "er").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "deep" / "er")
    code, out, _ = gradsmith_cli("--format", "json")
    assert code == 0
    ((name, verdict),) = _verdicts(out).items()
    file, _, function = name.partition("::")
    assert (Path(file).resolve(), function, verdict) == (tmp_path / "ops" / "good.py", "Cube",
                                                          "pass")


def test_command_line_targets_replace_the_configured_ones(write, snippets, pyproject,
                                                          gradsmith_cli):
    write("good.py", snippets.good)
    write("bad.py", snippets.bad)
    pyproject('[tool.gradsmith.check]\ntargets = ["bad.py"]\nisolate = false\n')
    code, out, _ = gradsmith_cli("--format", "json")
    assert code == 1 and _verdicts(out) == {"bad.py::BadMatmul": "fail"}
    code, out, _ = gradsmith_cli("good.py", "--format", "json")
    assert code == 0 and _verdicts(out) == {"good.py::Cube": "pass"}


def test_approximate_from_pyproject_and_the_command_line_overrides_it(write, pyproject,
                                                                      gradsmith_cli):
    write("half.py", HALF_GRAD)
    pyproject('[tool.gradsmith.check]\ntargets = ["half.py"]\napproximate = true\n'
              "isolate = false\n")
    _, out, _ = gradsmith_cli("--format", "json")
    (row,) = json.loads(out)["results"]
    assert "approximate" in row["checks"] and "gradients" not in row["checks"]
    assert "gradient-quality" in {f["code"] for f in row["report"]["findings"]}  # measured
    _, out, _ = gradsmith_cli("--no-approximate", "--format", "json")
    (row,) = json.loads(out)["results"]
    assert "approximate" not in row["checks"] and "gradients" in row["checks"]
    assert "gradient-mismatch" in {f["code"] for f in row["report"]["findings"]}  # judged


def test_isolate_from_pyproject_and_the_command_line_overrides_it(write, pyproject,
                                                                  gradsmith_cli, tmp_path):
    write("where.py", WHERE)
    # the Function writes its pid next to its file: a variable set here would be an environment
    # the test run's warm template was not started with, and the worker a fresh interpreter
    where = tmp_path / "pid.txt"
    pyproject('[tool.gradsmith.check]\ntargets = ["where.py"]\nisolate = false\n')
    assert gradsmith_cli()[0] == 0
    assert int(where.read_text()) == os.getpid()  # ran in this process
    # --no-compat: which process runs the Function does not depend on the deployment checks
    assert gradsmith_cli("--isolate", "--jobs", "1", "--no-compat")[0] == 0
    assert int(where.read_text()) != os.getpid()  # ran in a worker


def test_timeout_from_pyproject(write, pyproject, gradsmith_cli):
    write("slow.py", """
import time

@gradsmith.example(lambda: (torch.ones(3, dtype=torch.float64, requires_grad=True),))
class Slow(Function):
    @staticmethod
    def forward(ctx, x):
        time.sleep(20)
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad
""")
    pyproject('[tool.gradsmith.check]\ntargets = ["slow.py"]\ntimeout = 1\njobs = 1\n'
              'compat = false\n')  # forward hangs: no deployment check would run
    code, out, _ = gradsmith_cli("--format", "json")
    (row,) = json.loads(out)["results"]
    assert code == 1 and row["error"] == "timeout"


def test_explicit_config_file_wins_over_the_nearest(write, snippets, pyproject,
                                                    gradsmith_cli, tmp_path):
    write("good.py", snippets.good)
    write("bad.py", snippets.bad)
    pyproject('[tool.gradsmith.check]\ntargets = ["bad.py"]\n')
    (tmp_path / "other").mkdir()
    other = pyproject('[tool.gradsmith.check]\ntargets = ["../good.py"]\nisolate = false\n',
                      tmp_path / "other")
    code, out, _ = gradsmith_cli("--config", other, "--format", "json")
    assert code == 0 and _verdicts(out) == {"good.py::Cube": "pass"}


def test_missing_config_file_is_an_error(gradsmith_cli):
    code, _, err = gradsmith_cli("--config", "nope.toml")
    assert code == 2 and "--config nope.toml: no such file" in err


def test_command_line_values_are_still_validated(pyproject, gradsmith_cli):
    pyproject("[tool.gradsmith.check]\ntimeout = 60\n")
    code, _, err = gradsmith_cli("--timeout", "0")
    assert code == 2 and "--timeout must be a positive number" in err


DEPLOY_CHECKS = {"compile", "export", "autocast", "checkpoint", "torch_func"}


def test_compat_from_pyproject_and_the_command_line_overrides_it(write, snippets, pyproject,
                                                                 gradsmith_cli):
    write("good.py", snippets.good)
    pyproject('[tool.gradsmith.check]\ntargets = ["good.py"]\ncompat = false\nisolate = false\n')
    _, out, _ = gradsmith_cli("--format", "json")
    (row,) = json.loads(out)["results"]
    assert row["verdict"] == "pass" and not DEPLOY_CHECKS & set(row["checks"])
    _, out, _ = gradsmith_cli("--compat", "--format", "json")
    (row,) = json.loads(out)["results"]
    assert row["verdict"] == "pass" and DEPLOY_CHECKS <= set(row["checks"])


def test_startup_timeout_from_pyproject_and_the_command_line_overrides_it(write, snippets,
                                                                           pyproject,
                                                                           gradsmith_cli):
    write("good.py", snippets.good)
    pyproject('[tool.gradsmith.check]\ntargets = ["good.py"]\nstartup-timeout = 0.01\n')
    code, out, err = gradsmith_cli()
    assert code == 2 and "did not start within 0.01 s" in err and out == ""
    code, out, err = gradsmith_cli("--startup-timeout", "300", "--no-compat")
    assert code == 0, err
