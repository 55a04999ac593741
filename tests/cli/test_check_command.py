"""``gradsmith check`` in-process (``--no-isolate``): exit codes, output, JSON, targets, HTML."""

from __future__ import annotations

import base64
import json
import sys

import pytest


def _json(out: str) -> dict:
    return json.loads(out)


def test_correct_function_passes_with_exit_0(write, snippets, gradsmith_cli):
    path = write("ops.py", snippets.good)
    code, out, _ = gradsmith_cli(path, "--no-isolate")
    assert code == 0
    assert "ops.py::Cube" in out and "PASS" in out and "1 passed, 0 failed" in out


def test_wrong_gradient_fails_with_exit_1_and_shows_where_and_fix(write, snippets,
                                                                   gradsmith_cli):
    path = write("ops.py", snippets.good, snippets.bad)
    code, out, _ = gradsmith_cli(path, "--no-isolate")
    assert code == 1
    table_row = next(line for line in out.splitlines() if "ops.py::BadMatmul" in line)
    assert "FAIL" in table_row
    details = out.split("FAIL ops.py::BadMatmul", 1)[1]
    assert "gradient-mismatch" in details and "w" in details
    assert "fix:" in details
    assert "1 passed, 1 failed" in out


def test_json_document_is_parseable_and_complete(write, snippets, gradsmith_cli):
    path = write("ops.py", snippets.good, snippets.bad, snippets.no_inputs)
    code, out, _ = gradsmith_cli(path, "--no-isolate", "--format", "json")
    doc = _json(out)
    assert code == 1 and doc["summary"]["exit_code"] == 1
    assert doc["targets"] == [str(path)]
    verdicts = {r["name"].split("::")[1]: r["verdict"] for r in doc["results"]}
    assert verdicts == {"Cube": "pass", "BadMatmul": "fail", "NeedsMode": "skip"}
    assert (doc["summary"]["passed"], doc["summary"]["failed"], doc["summary"]["skipped"]) \
        == (1, 1, 1)
    bad = next(r for r in doc["results"] if r["verdict"] == "fail")
    assert bad["report"]["passed"] is False
    assert any(f["code"] == "gradient-mismatch" and f["severity"] == "error"
               for f in bad["report"]["findings"])
    good = next(r for r in doc["results"] if r["verdict"] == "pass")
    assert good["inputs"].startswith("synthesised: x: float64")
    assert "gradients" in good["checks"]


def test_function_without_usable_inputs_is_skipped_with_the_fix(write, snippets,
                                                                 gradsmith_cli):
    path = write("ops.py", snippets.no_inputs)
    code, out, _ = gradsmith_cli(path, "--no-isolate", "--format", "json")
    (row,) = _json(out)["results"]
    assert row["verdict"] == "skip" and row["report"] is None
    assert "@gradsmith.example" in row["reason"] and "class NeedsMode" in row["reason"]
    assert code == 1  # nothing was verified: a skip is not a pass


def test_skip_next_to_a_pass_does_not_fail_the_run(write, snippets, gradsmith_cli):
    path = write("ops.py", snippets.good, snippets.no_inputs)
    code, out, _ = gradsmith_cli(path, "--no-isolate")
    assert code == 0
    assert "SKIP" in out and "register inputs" in out


def test_file_name_selects_one_function(write, snippets, gradsmith_cli):
    path = write("ops.py", snippets.good, snippets.bad)
    code, out, _ = gradsmith_cli(f"{path}::Cube", "--no-isolate", "--format", "json")
    assert code == 0
    assert [r["name"].split("::")[1] for r in _json(out)["results"]] == ["Cube"]


def test_directory_target(write, snippets, gradsmith_cli, tmp_path):
    write("a/one.py", snippets.good)
    write("a/b/two.py", snippets.bad)
    code, out, _ = gradsmith_cli(tmp_path / "a", "--no-isolate", "--format", "json")
    assert code == 1
    assert sorted(r["verdict"] for r in _json(out)["results"]) == ["fail", "pass"]


def test_dotted_module_target_and_k_filter(gradsmith_cli):
    code, out, _ = gradsmith_cli("gradsmith.examples.reductions", "-k", "mean",
                                 "--no-isolate", "--format", "json")
    doc = _json(out)
    assert code == 0
    assert [r["name"] for r in doc["results"]] == [
        "gradsmith.examples.reductions::Mean[dim -1]",
        "gradsmith.examples.reductions::Mean[dim 1, keepdim]",
    ]


@pytest.mark.parametrize("args, message", [
    (["missing.py"], "no such file or directory"),
    (["{tmp}/ops.py::Nope"], "no object named 'Nope'; candidates there: Cube"),
    (["{tmp}/broken.py"], "syntax error at line 2"),
    (["{tmp}/ops.py", "--timeout", "0"], "--timeout must be a positive number"),
    (["{tmp}/ops.py", "--jobs", "0"], "--jobs must be >= 1"),
    (["{tmp}/ops.py", "-k", "zzz"], "found no torch.autograd.Function"),
    (["{tmp}/ops.py", "--format", "xml"], "invalid choice"),
])
def test_usage_errors_exit_2_and_name_the_problem(args, message, write, snippets,
                                                  gradsmith_cli, tmp_path):
    write("ops.py", snippets.good)
    write("broken.py", "x = 1\ndef f(:\n", header=False)
    code, out, err = gradsmith_cli(*(a.format(tmp=tmp_path) for a in args), "--no-isolate")
    assert code == 2
    assert message in " ".join(err.split())


def test_import_error_is_a_failed_row_and_exit_2(write, snippets, gradsmith_cli, tmp_path):
    write("ok.py", snippets.good)
    # With the torch/gradsmith imports, as a file holding a Function has: a walked file whose
    # text shows no Function is not imported at all (discovery.prefilter), so no error to show.
    write("bad.py", snippets.raises_at_import)
    code, out, _ = gradsmith_cli(tmp_path, "--no-isolate", "--format", "json")
    doc = _json(out)
    assert code == 2 and doc["summary"]["import_errors"] == 1
    bad = next(r for r in doc["results"] if r["name"] == "bad.py")
    assert bad["verdict"] == "fail" and bad["error"] == "import"
    assert "RuntimeError: broken at import time" in bad["reason"]
    assert any(r["verdict"] == "pass" for r in doc["results"])


def test_html_report_has_three_heatmaps_per_mismatch(write, snippets, gradsmith_cli, tmp_path):
    path = write("ops.py", snippets.bad)
    report = tmp_path / "report.html"
    code, out, _ = gradsmith_cli(path, "--no-isolate", "--html", report)
    assert code == 1 and f"HTML report written to {report}" in out
    page = report.read_text()
    assert page.startswith("<!DOCTYPE html>") and "FAIL ops.py::BadMatmul" in page
    images = page.split("data:image/png;base64,")[1:]
    assert images, "a gradient mismatch must produce at least one heatmap"
    png = base64.b64decode(images[0].split("'", 1)[0])
    assert png.startswith(b"\x89PNG\r\n\x1a\n")


def test_html_without_matplotlib_says_how_to_install(write, snippets, gradsmith_cli,
                                                     monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import raises ImportError
    path = write("ops.py", snippets.good)
    code, _, err = gradsmith_cli(path, "--no-isolate", "--html", tmp_path / "r.html")
    assert code == 2
    assert "pip install 'gradsmith[html]'" in err
    assert not (tmp_path / "r.html").exists()


TENSOR_ON_CTX = """
class StoresOnCtx(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.x = x  # should be ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        return 2 * ctx.x * grad
"""


def test_warnings_of_passing_functions_are_shown_and_verbose_prints_reports(write, snippets,
                                                                            gradsmith_cli):
    path = write("ops.py", TENSOR_ON_CTX, snippets.good)
    code, out, _ = gradsmith_cli(path, "--no-isolate")
    assert code == 0
    assert "WARNING tensor-on-ctx (ops.py::StoresOnCtx" in out
    assert "fix:" in out.split("tensor-on-ctx", 1)[1]
    code, out, _ = gradsmith_cli(path, "--no-isolate", "-v")
    assert "PASS ops.py::Cube" in out and "gradsmith check ops.py::Cube: PASSED" in out


def test_progress_is_reported_for_every_check(write, snippets, tmp_path):
    from gradsmith.checkrun.session import run_check
    from gradsmith.discovery import resolve_targets

    write("ops.py", snippets.good, snippets.bad, snippets.no_inputs)
    calls = []
    result = run_check(resolve_targets(["ops.py"], cwd=tmp_path), isolate=False,
                       progress=lambda done, total, row: calls.append((done, total, row["name"])))
    assert [(d, t) for d, t, _ in calls] == [(1, 3), (2, 3), (3, 3)]
    assert {name for _, _, name in calls} == {r["name"] for r in result.rows}
    assert result.exit_code() == 1


RAISES = """
@gradsmith.example(lambda: (torch.ones(3, dtype=torch.float64, requires_grad=True),))
class RaisesInForward(Function):
    @staticmethod
    def forward(ctx, x):
        raise RuntimeError("kernel exploded")

    @staticmethod
    def backward(ctx, grad):
        return grad


def _broken_factory():
    raise OSError("example data file missing")


@gradsmith.example(_broken_factory)
class BadExample(Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return 2 * grad
"""


def test_user_code_that_raises_is_a_failed_row_not_a_traceback(write, gradsmith_cli):
    path = write("ops.py", RAISES)
    code, out, err = gradsmith_cli(path, "--no-isolate", "--format", "json")
    rows = {r["name"]: r for r in json.loads(out)["results"]}
    assert code == 1 and "Traceback" not in err
    bad_example = rows["ops.py::BadExample"]
    assert (bad_example["verdict"], bad_example["error"]) == ("fail", "exception")
    assert "OSError: example data file missing" in bad_example["reason"]
    raising = rows["ops.py::RaisesInForward"]
    assert raising["verdict"] == "fail" and raising["error"] is None  # a finding, not a crash
    errors = [f for f in raising["report"]["findings"] if f["severity"] == "error"]
    assert any("kernel exploded" in f["message"] for f in errors)


def test_module_that_reexports_registered_ops_is_a_target(gradsmith_cli):
    # gradsmith.functional defines nothing itself: every op is re-exported from gradsmith.ops.
    code, out, _ = gradsmith_cli("gradsmith.functional", "-k", "clipped_relu", "--no-isolate",
                                 "--format", "json")
    doc = _json(out)
    assert code == 0
    names = [r["name"] for r in doc["results"]]
    assert names and all(n.startswith("gradsmith.functional::clipped_relu") for n in names)
