"""Output formats and the CLI: json fields, SARIF 2.1.0 structure, GitHub annotations, exit codes."""

from __future__ import annotations

import argparse
import json

import pytest

from gradsmith.cli import lint as cli
from gradsmith.linter import RULES, lint
from gradsmith.linter._formats import render

SRC = (
    "import torch\n\n\nclass Fn(torch.autograd.Function):\n    @staticmethod\n"
    "    def forward(ctx, x):\n        return x.data * 2\n\n    @staticmethod\n"
    "    def backward(ctx, g):\n        g *= 2\n        return g\n"
)


@pytest.fixture
def findings():
    return lint(source=SRC, filename="pkg/ops.py")


def test_json_is_a_list_of_flat_objects(findings):
    data = json.loads(render(findings, "json"))
    assert [d["code"] for d in data] == ["GS201", "GS102"]
    for d in data:
        assert set(d) == {"path", "line", "col", "code", "severity", "message"}
        assert d["severity"] in ("error", "warning", "info")
        assert d["path"] == "pkg/ops.py" and isinstance(d["line"], int)


def test_sarif_has_the_2_1_0_structure(findings):
    log = json.loads(render(findings, "sarif", "1.2.3"))
    assert log["version"] == "2.1.0" and "sarif-2.1.0" in log["$schema"]
    (run,) = log["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "gradsmith-lint" and driver["version"] == "1.2.3"
    assert [r["id"] for r in driver["rules"]] == sorted(RULES)
    for result in run["results"]:
        assert driver["rules"][result["ruleIndex"]]["id"] == result["ruleId"]
        assert result["level"] in ("error", "warning", "note")
        region = result["locations"][0]["physicalLocation"]["region"]
        assert region["startLine"] >= 1 and region["startColumn"] >= 1
        assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "pkg/ops.py"
    assert [r["level"] for r in run["results"]] == ["warning", "warning"]


def test_github_annotations(findings):
    lines = render(findings, "github").splitlines()
    assert lines[0].startswith("::warning file=pkg/ops.py,line=7,col=16,title=GS201::GS201 ")
    assert lines[1].startswith("::warning file=pkg/ops.py,line=11,col=9,title=GS102::GS102 ")


def test_text_groups_by_file_and_summarises(findings):
    out = render(findings, "text")
    assert out.splitlines()[0] == "pkg/ops.py"
    assert "  11:9  warning  GS102  " in out
    assert out.endswith("2 findings: 0 errors, 2 warnings, 0 info\n"
                        "[*] 2 fixable with `gradsmith lint --fix`")


def _run(argv, capsys):
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    code = cli.run(parser.parse_args(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_exit_codes(tmp_path, capsys):
    bad = tmp_path / "bad.py"
    bad.write_text(SRC)
    warn_only = tmp_path / "warn.py"
    warn_only.write_text(SRC.replace("g *= 2", "g = g * 2"))
    err = tmp_path / "err.py"  # GS101, an error, beside the two warnings
    err.write_text(SRC.replace("        return x.data", "        x.add_(1)\n        return x.data"))
    assert _run([str(err)], capsys)[0] == 1
    assert _run([str(bad)], capsys)[0] == 0  # GS102 and GS201 are warnings
    assert _run([str(warn_only)], capsys)[0] == 0
    assert _run([str(err), "--ignore", "GS101"], capsys)[0] == 0
    code, _, err = _run([str(tmp_path / "missing.py")], capsys)
    assert code == 2 and "does not exist" in err
    code, _, err = _run([str(bad), "--select", "XX1"], capsys)
    assert code == 2 and "matches no rule" in err


def test_cli_json_and_diff_and_fix(tmp_path, capsys):
    bad = tmp_path / "bad.py"
    bad.write_text(SRC)
    code, out, _ = _run([str(bad), "--format", "json"], capsys)
    assert code == 0 and {d["code"] for d in json.loads(out)} == {"GS102", "GS201"}
    code, out, _ = _run([str(bad), "--diff"], capsys)
    assert "-        g *= 2\n+        g = g * 2\n" in out and bad.read_text() == SRC
    assert code == 0  # what remains after the fixes has no error
    code, _, err = _run([str(bad), "--fix"], capsys)
    assert code == 0 and "fixed 2 finding(s) in 1 file(s)" in err
    assert lint(bad, config=False) == []


def test_fix_with_diff_previews_and_never_writes(tmp_path, capsys):
    bad = tmp_path / "bad.py"
    bad.write_text(SRC)
    code, out, err = _run([str(bad), "--fix", "--diff"], capsys)
    assert "+        g = g * 2\n" in out and "fixed" not in err
    assert bad.read_text() == SRC


def test_explain_prints_why_and_fix(capsys):
    code, out, _ = _run(["--explain", "GS102"], capsys)
    rule = RULES["GS102"]
    assert code == 0 and out.startswith("GS102 inplace-grad-output (warning, auto-fix)")
    assert rule.why in out and rule.fix in out and "grad_output *= 2  # GS102" in out
    code, _, err = _run(["--explain", "GS999"], capsys)
    assert code == 2 and "'GS999'" in err and "not a rule code" in err
