"""``gradsmith check --explain CODE`` says what a finding code means, from data inside the
installed package (issue 21: messages and SARIF pointed pip users at docs/check.md, which a
pip install does not have, and there is no project URL to point at instead)."""

from __future__ import annotations

import builtins
import json
from pathlib import Path

from setuptools import find_packages

from gradsmith.checker.code_docs import explain, lookup
from gradsmith.checker.codes import COMMAND_ROWS, ROWS

ROOT = Path(__file__).resolve().parents[2]


def test_explain_prints_severity_check_cause_and_fix(gradsmith_cli):
    code, out, err = gradsmith_cli("--explain", "gradient-mismatch")
    assert code == 0 and err == ""
    assert out.splitlines()[0] == ("gradient-mismatch: error (warning where forward approximates "
                                   "what backward differentiates), reported by the gradients check")
    assert "\nCause: backward disagrees with finite differences: which input" in out
    assert "\nFix: re-derive backward (chain rule, transposes, broadcast sums)" in out


def test_a_severity_that_depends_on_the_case_says_when(gradsmith_cli):
    # mutation.py reports input-mutated as an error, or a warning for an input needing no grad.
    code, out, _ = gradsmith_cli("--explain", " Input-Mutated ")
    assert code == 0
    assert out.splitlines()[0] == ("input-mutated: error (warning for inputs needing no grad), "
                                   "reported by the mutation check")


def test_codes_only_the_command_reports_are_explained_too(gradsmith_cli):
    code, out, _ = gradsmith_cli("--explain", "required-not-checked")
    assert code == 0 and out.startswith("required-not-checked: error, reported by any check")
    assert "--require" in out and "--no-compat" in out


def test_an_unknown_code_is_one_line_naming_the_option_the_value_and_close_codes(
        gradsmith_cli):
    code, out, err = gradsmith_cli("--explain", "gradient-mismach")
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert line.startswith("gradsmith check: error: --explain got 'gradient-mismach', which "
                           "is not a finding code; did you mean 'gradient-mismatch'")
    assert "`gradsmith check --explain all` lists them all" in line
    code, _, err = gradsmith_cli("--explain", "zzz")
    assert code == 2 and "did you mean" not in err and "--explain all" in err


def test_all_lists_every_code_with_its_severity_and_check(gradsmith_cli):
    code, out, _ = gradsmith_cli("--explain", "all")
    rows = {line.split()[0]: line.split()[1:3] for line in out.splitlines()}
    assert code == 0 and list(rows) == [*ROWS, *COMMAND_ROWS]
    assert rows["kink"] == ["info", "gradients"]
    assert rows["deployment-timeout"] == ["warning", "any"]


def test_explain_ignores_the_projects_configuration_and_targets(gradsmith_cli, tmp_path):
    # A pyproject that makes every check run a usage error does not stop --explain.
    (tmp_path / "pyproject.toml").write_text('[tool.gradsmith.check]\nrequire = ["onnxx"]\n')
    code, out, _ = gradsmith_cli("no_such_file.py", "--explain", "kink")
    assert code == 0 and out.startswith("kink: info")


def test_explanations_come_from_the_package_not_from_files(monkeypatch):
    """No file is read (a pip install has no docs/), and the modules are in the packages the
    wheel is built from (``[tool.setuptools.packages.find] where = ["src"]``)."""

    def refuse(*args, **kwargs):
        raise AssertionError(f"read a file: {args[:1]}")

    monkeypatch.setattr(builtins, "open", refuse)
    monkeypatch.setattr(Path, "read_text", refuse)
    for code in [*ROWS, *COMMAND_ROWS]:
        text = explain(code)
        assert f"Cause: {lookup(code).cause}" in text and f"Fix: {lookup(code).fix}" in text
    monkeypatch.undo()
    assert "gradsmith.checker" in find_packages(where=str(ROOT / "src"))
    for module in ("codes.py", "code_docs.py"):
        assert (ROOT / "src" / "gradsmith" / "checker" / module).is_file()


def test_sarif_rule_help_carries_the_cause_and_fix_not_a_docs_path():
    from types import SimpleNamespace

    from gradsmith.cli._check_formats import sarif

    finding = {"code": "gradient-mismatch", "severity": "error", "message": "m", "hint": "h"}
    rows = [{"file": None, "line": 3, "name": "ops.py::F", "verdict": "fail", "error": None,
             "report": {"findings": [finding]}},
            {"file": None, "line": 9, "name": "ops.py::G", "verdict": "fail",
             "error": "timeout", "reason": "ran out of time", "report": None}]
    rules = {r["id"]: r["help"]["text"]
             for r in json.loads(sarif(SimpleNamespace(rows=rows)))["runs"][0]["tool"]["driver"][
                 "rules"]}
    assert rules["gradient-mismatch"].startswith("backward disagrees with finite differences")
    assert "Fix: re-derive backward" in rules["gradient-mismatch"]
    assert "`gradsmith check --explain gradient-mismatch`" in rules["gradient-mismatch"]
    # A row that could not be checked is not a finding code: no --explain pointer for it.
    assert "--explain" not in rules["timeout"] and "message says why" in rules["timeout"]
