"""The opt-in ``onnx`` deployment column (issue 21): ``torch.onnx.export`` with both exporters,
run under ONNX Runtime on the example inputs and on a second draw, compared with eager."""

from __future__ import annotations

import pytest
import torch

import gradsmith
from gradsmith._errors import GradsmithError
from gradsmith.checker.deploy import onnx_export


class ItemScale(torch.autograd.Function):
    """Right in eager; reads its scale with ``.item()``: a trace bakes that value in."""

    @staticmethod
    def forward(x, s):
        return x * s.item() + 1.0

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, g):
        x, s = ctx.saved_tensors
        return g * s, (g * x).sum()


class Scale(torch.autograd.Function):
    """The same computation with the scale kept a tensor: exports correctly."""

    @staticmethod
    def forward(x, s):
        return x * s + 1.0

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, g):
        x, s = ctx.saved_tensors
        return g * s, (g * x).sum()


class Zeta(torch.autograd.Function):
    """An operator neither ONNX exporter knows (aten::special_zeta)."""

    @staticmethod
    def forward(x):
        return torch.special.zeta(x, 2.0)

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, g):
        return g


def _inputs():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(5, generator=gen, dtype=torch.float64, requires_grad=True)
    return x, torch.tensor(2.0, dtype=torch.float64, requires_grad=True)


def _onnx(report):
    return [f for f in report.findings if f.check == "onnx"]


def test_a_value_read_with_item_baked_into_the_export_is_caught():
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    report = gradsmith.check(ItemScale, *_inputs(), onnx=True)
    found = _onnx(report)
    # The TorchScript exporter bakes s.item() in and drops s; the dynamo exporter keeps it.
    assert [f.details["exporter"] for f in found] == ["torchscript"]
    (f,) = found
    assert f.code == "onnx-mismatch" and f.severity == "error"
    assert "torchscript exporter" in f.message and "baked a value" in f.message
    assert "disagrees on new inputs" in f.message and "no input for s" in f.message
    assert f.details["dropped"] == ["s"]
    example, second = f.details["errors"]
    assert example < 1e-6  # right where it was traced...
    # ...and on the second draw off by what a constant scale gives: hand computation of
    # max|x2 * (s - s2)| / max|x2 * s2 + 1| on the draw the check used (its own helper
    # draws it; the arithmetic here is independent of the exported model).
    x, s = (t.detach().float() for t in _inputs())

    class _Session:
        generator = staticmethod(lambda salt: torch.Generator().manual_seed(salt))

    x2, s2 = onnx_export._other_draw(_Session(), [x, s])
    assert s2 != s  # the second draw does change the scale
    want = float((x2 * (s - s2)).abs().max() / (x2 * s2 + 1.0).abs().max())
    assert second == pytest.approx(want, rel=1e-3)
    assert report.compat["onnx"]["status"] == "fail"
    assert report.format().splitlines()[-1].endswith("| onnx fail")
    assert not report.passed


def test_a_function_that_exports_correctly_passes():
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    report = gradsmith.check(Scale, *_inputs(), onnx=True)
    assert "onnx" in report.checks and _onnx(report) == []
    assert report.compat["onnx"] == {"status": "ok", "codes": [], "note": ""}
    assert report.passed


def test_an_export_that_raises_is_a_warning_naming_the_exporter():
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    x = torch.rand(4, dtype=torch.float64, requires_grad=True) + 1.5
    report = gradsmith.check(Zeta, x, onnx=True, checks=["structure"])
    found = _onnx(report)
    assert {f.details["exporter"] for f in found} == {"torchscript", "dynamo"}
    assert all(f.code == "onnx-export-error" and f.severity == "warning" for f in found)
    by = {f.details["exporter"]: f.message for f in found}
    assert "(torchscript exporter)" in by["torchscript"] and "special_zeta" in by["torchscript"]
    assert "(dynamo exporter)" in by["dynamo"] and "zeta" in by["dynamo"]
    assert all("\x1b" not in m and "\n" not in m for m in by.values())
    assert report.compat["onnx"]["status"] == "warn" and report.passed


def test_not_requested_the_column_is_na_saying_why():
    report = gradsmith.check(Scale, *_inputs(), compat=True, checks=["structure", "export"])
    assert "onnx" not in report.checks
    cell = report.compat["onnx"]
    assert cell["status"] == "n/a" and cell["note"].startswith("not requested")
    assert "--require onnx" in cell["note"]
    compat_line = report.format().splitlines()[-1]
    assert compat_line.startswith("  compat: eager") and "onnx" not in compat_line


def test_requiring_onnx_without_the_extra_is_a_usage_error(monkeypatch, tmp_path, capsys):
    from gradsmith import _requires
    from gradsmith.cli import main

    monkeypatch.setattr(_requires, "onnx_missing", lambda: ["onnxruntime"])
    with pytest.raises(GradsmithError, match=r"onnx=True needs the onnx extra.*onnxruntime "
                                             r"is not installed.*gradsmith\[onnx\]"):
        gradsmith.check(Scale, *_inputs(), onnx=True)
    (tmp_path / "ops.py").write_text("import torch\n")
    monkeypatch.chdir(tmp_path)
    code = main(["check", "ops.py", "--no-isolate", "--require", "onnx"])
    err = capsys.readouterr().err
    assert code == 2
    assert "--require onnx" in err and "onnxruntime is not installed" in err
    assert "pip install 'gradsmith[onnx]'" in " ".join(err.split())


def test_onnx_option_must_be_a_bool_and_does_not_combine_with_compat_false():
    with pytest.raises(GradsmithError, match="onnx must be True or False, got 'yes'"):
        gradsmith.check(Scale, *_inputs(), onnx="yes")
    with pytest.raises(GradsmithError, match="onnx=True and compat=False do not combine"):
        gradsmith.check(Scale, *_inputs(), onnx=True, compat=False)


OPS = '''
import torch
import gradsmith
from torch.autograd import Function


@gradsmith.example(lambda: (torch.randn(4, dtype=torch.float64, requires_grad=True),
                            torch.tensor(2.5, dtype=torch.float64, requires_grad=True)))
class ItemScale(Function):
    @staticmethod
    def forward(x, s):
        return x * s.item()

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, g):
        x, s = ctx.saved_tensors
        return g * s, (g * x).sum()
'''


def test_require_onnx_runs_the_column_and_fails_the_run(monkeypatch, tmp_path, capsys):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    import json

    from gradsmith.cli import main

    (tmp_path / "ops.py").write_text(OPS)
    monkeypatch.chdir(tmp_path)
    code = main(["check", "ops.py", "--no-isolate", "--format", "json", "--require", "onnx"])
    (row,) = json.loads(capsys.readouterr().out)["results"]
    assert code == 1 and row["verdict"] == "fail"
    assert row["report"]["compat"]["onnx"]["status"] == "fail"
    (f,) = [f for f in row["report"]["findings"] if f["check"] == "onnx"]
    assert f["code"] == "onnx-mismatch" and f["details"]["exporter"] == "torchscript"


def test_the_text_table_shows_the_onnx_column_only_when_a_row_asked_for_it():
    from gradsmith.checker.deploy.matrix import COLUMNS
    from gradsmith.cli._compat_output import shown_columns

    def row(onnx_cell):
        return {"report": {"compat": {"eager": {"status": "ok", "codes": [], "note": ""},
                                      "onnx": onnx_cell}}}

    asked = {"status": "ok", "codes": [], "note": ""}
    not_asked = {"status": "n/a", "codes": [],
                 "note": "not requested (opt-in: --require onnx, or onnx=True)"}
    assert shown_columns([row(not_asked), row(not_asked)]) == COLUMNS[:-1]
    assert shown_columns([row(not_asked), row(asked)]) == COLUMNS
