"""Command-line conveniences of `lint` and `check`: default path, --exit-zero, --statistics,
fixable marks, the subcommand's usage on unknown options, one error prefix."""

from __future__ import annotations

import json
import re

import pytest

from gradsmith.cli import main
from gradsmith.linter import RULES

# GS102 (warning, fixable) in backward and GS201 (warning, fixable) in forward; GS202 twice
# would be the same code on two lines.
BAD = (
    "import torch\n\n\nclass Fn(torch.autograd.Function):\n    @staticmethod\n"
    "    def forward(ctx, x):\n        ctx.save_for_backward(x)\n        return x.data * 2\n\n"
    "    @staticmethod\n    def backward(ctx, g):\n        (x,) = ctx.saved_variables\n"
    "        (y,) = ctx.saved_variables\n        g *= 2\n        return g + 0 * x * y\n"
)
# A finding without a fix: an in-place edit of an input in forward (GS101).
UNFIXABLE = (
    "import torch\n\n\nclass Inplace(torch.autograd.Function):\n    @staticmethod\n"
    "    def forward(ctx, x):\n        x.add_(1)\n        return x * 2\n\n"
    "    @staticmethod\n    def backward(ctx, g):\n        return g\n"
)
ERROR_PREFIX = re.compile(r"^gradsmith (lint|check|bench): error: \S")


def _run(argv, capsys) -> tuple[int, str, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "bad.py").write_text(BAD)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "inplace.py").write_text(UNFIXABLE)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _codes(text: str) -> list[tuple[str, str]]:
    return re.findall(r"^\s+(\d+:\d+)\s+\w+\s+(GS\d{3})", text, re.M)


def test_lint_without_a_path_lints_the_current_directory(project, capsys):
    code, out, err = _run(["lint"], capsys)
    explicit = _run(["lint", "."], capsys)
    assert (code, out, err) == explicit
    assert code == 1 and err == ""
    assert "bad.py" in out and "inplace.py" in out and "GS101" in out


def test_exit_zero_on_lint(project, capsys):
    assert _run(["lint", "."], capsys)[0] == 1  # pkg/inplace.py: GS101, an error
    code, out, _ = _run(["lint", ".", "--exit-zero"], capsys)
    assert code == 0 and "GS101" in out and "GS102" in out
    # Usage errors still exit 2.
    assert _run(["lint", "missing.py", "--exit-zero"], capsys)[0] == 2


def test_statistics_counts_each_code(project, capsys):
    code, out, _ = _run(["lint", ".", "--statistics"], capsys)
    assert code == 1
    rows = [line.split() for line in out.splitlines()]
    expected = {"GS202": 2, "GS101": 1, "GS102": 1, "GS201": 1}
    assert {r[1]: int(r[0]) for r in rows} == expected
    assert [r[1] for r in rows] == ["GS202", "GS101", "GS102", "GS201"]  # most first
    for r in rows:
        assert r[-1] == RULES[r[1]].name
        assert ("[*]" in r) == (r[1] != "GS101")
    code, out, _ = _run(["lint", ".", "--statistics", "--format", "json"], capsys)
    data = json.loads(out)
    assert {d["code"]: d["count"] for d in data} == expected
    assert {d["code"] for d in data if d["fixable"]} == {"GS202", "GS102", "GS201"}
    code, _, err = _run(["lint", ".", "--statistics", "--format", "sarif"], capsys)
    assert code == 2 and "--statistics" in err and ERROR_PREFIX.match(err)


def test_text_marks_fixable_findings(project, capsys):
    _, out, _ = _run(["lint", "."], capsys)
    lines = out.splitlines()
    marked = [line for line in lines if re.search(r"GS\d{3}  \[\*\] ", line)]
    unmarked = [line for line in lines if re.search(r"GS\d{3}  [^\[]", line)]
    assert len(marked) == 4 and all("GS101" not in line for line in marked)
    assert len(unmarked) == 1 and "GS101" in unmarked[0]
    assert lines[-1] == "[*] 4 fixable with `gradsmith lint --fix`"
    # After --fix nothing left is offered as fixable.
    _, out, err = _run(["lint", ".", "--fix"], capsys)
    assert "[*]" not in out and "fixed 4 finding(s) in 1 file(s)" in err


@pytest.mark.parametrize("command", ["lint", "check", "bench"])
def test_unknown_option_prints_the_subcommands_usage(command, capsys):
    code, out, err = _run([command, "--no-such-option"], capsys)
    assert code == 2 and out == ""
    assert err.startswith(f"usage: gradsmith {command} ")
    assert err.splitlines()[-1] == (
        f"gradsmith {command}: error: unrecognized arguments: --no-such-option")


@pytest.mark.parametrize("argv", [
    ["lint", "missing.py"],
    ["lint", "--select", "XX9"],
    ["lint", "--explain", "GS999"],
    ["lint", "--format", "nope"],
    ["check", "--timeout", "-1", "x.py"],
    ["check", "--jobs", "0", "x.py"],
    ["check", "--timeout", "soon"],
    ["bench", "--repeat", "0"],
    ["bench", "no_such_op"],
], ids=lambda argv: " ".join(argv))
def test_every_usage_error_has_one_prefix(argv, project, capsys):
    code, _, err = _run(argv, capsys)
    assert code == 2
    lines = [line for line in err.splitlines() if "error" in line]
    assert len(lines) == 1 and ERROR_PREFIX.match(lines[0]), err
    command = argv[0]
    assert lines[0].startswith(f"gradsmith {command}: error: ")
    assert not lines[0].startswith(f"gradsmith {command}: error: {command}: ")
    assert not lines[0].startswith(f"gradsmith {command}: error: gradsmith ")


def test_exit_zero_on_check(write, snippets, gradsmith_cli):
    path = write("ops.py", snippets.good, snippets.bad)
    code, out, _ = gradsmith_cli(path, "--no-isolate", "--no-compat")
    assert code == 1 and "FAIL" in out
    code, out, _ = gradsmith_cli(path, "--no-isolate", "--no-compat", "--exit-zero")
    assert code == 0 and "FAIL" in out and "1 passed, 1 failed" in out
    # Usage errors still exit 2.
    code, _, err = gradsmith_cli(path, "--no-isolate", "--exit-zero", "--jobs", "0")
    assert code == 2 and err.startswith("gradsmith check: error: --jobs")


def test_file_names_cannot_forge_lint_output(tmp_path, monkeypatch, capsys):
    forged = "0 findings: 0 errors, 0 warnings, 0 info"
    (tmp_path / f"x\n{forged}\n\x1b[2J.py").write_text(UNFIXABLE)
    monkeypatch.chdir(tmp_path)
    code, out, _ = _run(["lint"], capsys)
    assert code == 1
    assert forged not in out.splitlines() and "\x1b" not in out
    assert out.splitlines()[0] == f"x\\n{forged}\\n\\x1b[2J.py"
    assert out.splitlines()[-1] == "1 finding: 1 error, 0 warnings, 0 info"
