"""The compatibility matrix and the deployment options of ``gradsmith.check``: documented gaps,
``compat=False``, the compile backend, bad options, the setup_context rewrite, CUDA."""

from __future__ import annotations

import deploy_cases as D
import pytest
import torch

from gradsmith import GradsmithError
from gradsmith.checker import check
from gradsmith.checker.deploy import DEPLOY_MODULES
from gradsmith.checker.deploy.matrix import COLUMNS, apply_gaps, build, merge, validate_gaps
from gradsmith.checker.deploy.rewrite import setup_context_rewrite
from gradsmith.checker.report import Finding, Report


def _report(*findings: Finding, checks=("gradients", "compile", "export")) -> Report:
    return Report(name="f", findings=list(findings), checks=list(checks))


def test_cells_follow_the_worst_finding_of_their_column():
    report = _report(
        Finding("compile-graph-break", "warning", "m", "h", "compile"),
        Finding("export-mismatch", "error", "m", "h", "export"),
        Finding("kink", "info", "m", "h", "gradients"))
    matrix = build(report)
    assert list(matrix) == list(COLUMNS)
    assert matrix["eager"]["status"] == "ok"
    assert matrix["compile"] == {"status": "warn", "codes": ["compile-graph-break"], "note": "m"}
    assert matrix["export"]["status"] == "fail"
    assert matrix["autocast"]["status"] == "not run"


def test_custom_op_fake_kernel_findings_count_in_compile_and_export():
    report = _report(Finding("custom-op-no-fake", "warning", "m", "h", "custom_op"),
                     checks=("gradients", "custom_op"))
    matrix = build(report)
    assert matrix["compile"]["status"] == matrix["export"]["status"] == "warn"
    assert matrix["eager"]["status"] == "ok"


def test_skipped_column_is_na_with_its_reason_and_limits_are_na():
    report = _report(Finding("func-unsupported-by-torch", "info", "torch cannot", "", "torch_func",
                             details={"limitation": True}), checks=("gradients", "torch_func"))
    report.skipped["autocast"] = "the Function does not run in float32"
    matrix = build(report)
    assert matrix["autocast"] == {"status": "n/a", "codes": [],
                                  "note": "the Function does not run in float32"}
    assert matrix["torch.func"]["status"] == "n/a"


def test_gaps_turn_problems_into_info_and_unused_gaps_are_reported():
    report = _report(Finding("export-drops-backward", "warning", "m", "h", "export"))
    apply_gaps(report, {"export": "estimator", "compile": "never compiled"})
    (dropped, unused) = report.findings
    assert dropped.severity == "info" and dropped.details["gap"] == "estimator"
    assert dropped.details["severity"] == "warning"
    assert unused.code == "gap-not-observed" and unused.details["column"] == "compile"
    matrix = build(report)
    assert matrix["export"] == {"status": "gap", "codes": ["export-drops-backward"],
                                "note": "estimator"}


def test_merge_keeps_the_worst_cell_of_several_examples():
    ok, warn = {"status": "ok", "codes": [], "note": ""}, {"status": "warn", "codes": ["x"],
                                                            "note": "n"}
    skipped = {"status": "not run", "codes": [], "note": ""}
    assert merge([ok, warn]) == warn
    assert merge([skipped, ok]) == ok
    assert merge([skipped, skipped]) == skipped


@pytest.mark.parametrize(("gaps", "message"), [
    ("export", "gaps must be a dict"),
    ({"exports": "x"}, r"unknown column\(s\) \['exports'\]"),
    ({"export": ""}, r"gaps\['export'\] must say why"),
])
def test_bad_gaps_are_a_clear_error(gaps, message):
    with pytest.raises(GradsmithError, match=message):
        validate_gaps(gaps)
    with pytest.raises(GradsmithError, match=message):
        check(D.OkVariance, *D._offset(), gaps=gaps)


def test_bad_compile_backend_is_a_clear_error():
    with pytest.raises(GradsmithError, match="compile_backend must be .* got 'tvm'"):
        check(D.OkVariance, *D._offset(), compile_backend="tvm")


def test_documented_gap_keeps_the_report_clean():
    report = check(D.BrokenExportedSTE, compat=True,
                   gaps={"export": "trained in eager, exported for inference"})
    assert report.compat["export"]["status"] == "gap"
    assert not [f for f in report.findings if f.severity != "info"]
    assert "documented gap (trained in eager" in str(report)


def test_no_compat_skips_every_deployment_check():
    report = check(D.BrokenNaiveVariance, *D._offset(), compat=False)
    assert report.compat == {}
    assert not set(report.checks) & set(DEPLOY_MODULES)
    assert "compat:" not in str(report)


def test_report_json_and_text_carry_the_matrix():
    report = check(D.BrokenNaiveVariance, *D._offset(), compat=True)
    data = report.to_dict()
    assert data["compat"]["float32"]["status"] == "fail"
    assert "float32 fail" in str(report)


def test_inductor_backend_compiles_a_small_function():
    report = check(D.OkVariance, *D._offset(), checks=["compile"], compile_backend="inductor")
    assert report.compat["compile"]["status"] == "ok", report


def test_rewrite_moves_ctx_statements_and_names_forward_intermediates():
    class Scale(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, alpha):
            s = torch.sigmoid(x)
            ctx.save_for_backward(s)
            ctx.alpha = alpha
            return s * alpha

        @staticmethod
        def backward(ctx, g):
            (s,) = ctx.saved_tensors
            return g * s * (1 - s) * ctx.alpha, None

    rewrite = setup_context_rewrite(Scale)
    forward, setup = rewrite.split("def setup_context")
    assert "def forward(x, alpha):" in forward and "ctx" not in forward
    assert "x, alpha = inputs" in setup and "ctx.alpha = alpha" in setup
    # s is computed in forward and not returned: the rewrite must say so.
    assert "# s: computed in forward" in setup


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_float16_autocast_is_checked_where_a_gpu_exists():
    broken = check(D.BrokenAutocastMatmul, compat=True)
    devices = {f.details.get("device") for f in broken.findings if f.code == "autocast-error"}
    assert devices == {"cpu", "cuda"}
    fixed = check(D.OkAutocastCast, compat=True)
    assert fixed.compat["autocast"]["status"] == "ok", fixed


def test_float16_autocast_path_runs_on_cpu_too(monkeypatch):
    # The CUDA float16 mode is the same code with another (device, dtype): exercise it on CPU.
    from gradsmith.checker.deploy import amp

    monkeypatch.setattr(amp, "modes", lambda: [("cpu", torch.float16)])
    broken = check(D.BrokenAutocastMatmul, checks=["autocast"])
    (f,) = [f for f in broken.findings if f.code == "autocast-error"]
    assert f.details["dtype"] == "torch.float16" and "cpu float16 autocast" in f.message
    fixed = check(D.OkAutocastCast, checks=["autocast"])
    assert fixed.compat["autocast"]["status"] == "ok", fixed


def test_no_compat_wins_over_an_explicit_checks_list():
    report = check(D.OkVariance, *D._offset(), checks=["gradients", "compile"], compat=False)
    assert report.checks == ["gradients"] and report.compat == {}
