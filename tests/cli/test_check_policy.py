"""``gradsmith check --require / --select / --ignore`` (and pyproject's), ``--format github`` and
``--format sarif`` (issue 21: a team fails the build where it deploys)."""

from __future__ import annotations

import json

import pytest

from gradsmith._check_policy import CHECK_COLUMN, EAGER_REQUIRABLE, REQUIRABLE
from gradsmith._config import DEPLOY_COLUMNS
from gradsmith.checker.deploy.matrix import CHECK_COLUMNS, COLUMNS

# Right in eager; old-style (forward takes ctx): torch.func refuses it, a warning only.
ITEM = """
@gradsmith.example(lambda: (torch.randn(4, dtype=torch.float64, requires_grad=True),
                            torch.tensor(2.5, dtype=torch.float64)))
class ItemScale(Function):
    @staticmethod
    def forward(ctx, x, scale):
        ctx.s = float(scale.item())
        return x * ctx.s

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.s, None
"""


def _rows(out: str) -> dict:
    return {r["name"]: r for r in json.loads(out)["results"]}


def test_require_turns_a_deployment_warning_into_a_failure(write, gradsmith_cli, tmp_path):
    write("ops.py", ITEM)
    code, out, _ = gradsmith_cli("ops.py", "--no-isolate", "--format", "json")
    row = _rows(out)["ops.py::ItemScale"]
    assert code == 0 and row["verdict"] == "pass"
    func_codes = row["report"]["compat"]["torch.func"]["codes"]
    assert row["report"]["compat"]["torch.func"]["status"] == "warn"
    assert func_codes == ["func-needs-setup-context"]
    code, out, _ = gradsmith_cli("ops.py", "--no-isolate", "--format", "json",
                                 "--require", "torch.func")
    row = _rows(out)["ops.py::ItemScale"]
    assert code == 1 and row["verdict"] == "fail"
    raised = [f for f in row["report"]["findings"]
              if f["details"].get("required") == "torch.func"]
    assert {f["code"] for f in raised} == set(func_codes)
    assert all(f["severity"] == "error" for f in raised)
    # The same from pyproject; a column the Function passes does not fail it.
    (tmp_path / "pyproject.toml").write_text('[tool.gradsmith.check]\nrequire = ["torch.func"]\n')
    assert gradsmith_cli("ops.py", "--no-isolate", "--format", "json")[0] == 1
    (tmp_path / "pyproject.toml").write_text('[tool.gradsmith.check]\nrequire = ["checkpoint"]\n')
    assert gradsmith_cli("ops.py", "--no-isolate", "--format", "json")[0] == 0
    # Ignoring the codes is the team's explicit choice: nothing left to fail.
    code, out, _ = gradsmith_cli("ops.py", "--no-isolate", "--format", "json",
                                 "--require", "torch.func", "--ignore", ",".join(func_codes))
    assert code == 0 and _rows(out)["ops.py::ItemScale"]["report"]["ignored"] == func_codes


@pytest.mark.parametrize("args, words", [
    (["--require", "compil"], ["--require", "'compil'", "valid: compile, export, autocast"]),
    (["--require", "compile", "--no-compat"], ["--require compile", "--no-compat"]),
    (["--ignore", "no-such-code"], ["--ignore", "'no-such-code'"]),
    (["--select", "gradient-mismach"], ["--select", "'gradient-mismach'"]),
])
def test_bad_policy_options_name_the_value_and_the_fix(write, snippets, gradsmith_cli, args,
                                                       words):
    write("ops.py", snippets.good)
    code, out, err = gradsmith_cli("ops.py", "--no-isolate", *args)
    assert code == 2 and out == ""
    for w in words:
        assert w in err, err


def test_bad_require_in_pyproject_names_it(write, snippets, gradsmith_cli, tmp_path):
    write("ops.py", snippets.good)
    (tmp_path / "pyproject.toml").write_text('[tool.gradsmith.check]\nrequire = ["onnxx"]\n')
    code, _, err = gradsmith_cli("ops.py", "--no-isolate")
    assert code == 2 and "'onnxx'" in err and "compile, export" in err


def test_select_and_ignore_decide_what_fails(write, snippets, gradsmith_cli):
    write("ops.py", snippets.bad)
    code, out, _ = gradsmith_cli("ops.py", "--no-isolate", "--no-compat", "--format", "json",
                                 "--select", "gradient-mismatch")
    row = _rows(out)["ops.py::BadMatmul"]
    assert code == 1 and {f["code"] for f in row["report"]["findings"]} == {"gradient-mismatch"}
    code, out, _ = gradsmith_cli("ops.py", "--no-isolate", "--no-compat", "--format", "json",
                                 "--select", "unneeded-grad")
    row = _rows(out)["ops.py::BadMatmul"]
    assert code == 0 and "gradient-mismatch" in row["report"]["ignored"]


def test_github_and_sarif_formats_place_findings_at_the_function(write, snippets, gradsmith_cli):
    path = write("ops.py", snippets.bad)
    line = path.read_text().splitlines().index("class BadMatmul(Function):") + 1
    code, out, _ = gradsmith_cli("ops.py", "--no-isolate", "--no-compat", "--format", "github")
    assert code == 1
    mismatch = [ln for ln in out.splitlines() if "title=gradient-mismatch" in ln]
    assert mismatch and mismatch[0].startswith(f"::error file=ops.py,line={line},")
    code, out, _ = gradsmith_cli("ops.py", "--no-isolate", "--no-compat", "--format", "sarif")
    log = json.loads(out)
    assert code == 1 and log["version"] == "2.1.0"
    results = log["runs"][0]["results"]
    hit = [r for r in results if r["ruleId"] == "gradient-mismatch"]
    assert hit and hit[0]["level"] == "error"
    region = hit[0]["locations"][0]["physicalLocation"]
    assert region["artifactLocation"]["uri"] == "ops.py" and region["region"]["startLine"] == line


def test_the_cli_lists_agree_with_the_matrix():
    assert DEPLOY_COLUMNS == COLUMNS[1:]
    assert REQUIRABLE == (*DEPLOY_COLUMNS, *EAGER_REQUIRABLE)
    deploy = {c: cols[0] for c, cols in CHECK_COLUMNS.items() if cols != ("eager",)}
    assert CHECK_COLUMN == deploy
