"""An error met only on the input set whose index is non-contiguous says so, and names the
index as likely read without its stride; a weight whose layout changes results is named as
read as if contiguous. Reduced case of a fused loss whose kernel loads ``labels_ptr + row``."""

import inspect
import json
import sys

import torch

from gradsmith.cli import main as cli_main


def _misread(labels):
    # What a kernel loading `labels_ptr + row` reads: storage in order, strides ignored.
    return torch.as_strided(labels, (labels.shape[-1],), (1,))


class PickedLoss(torch.autograd.Function):
    """sum_i logits[i, labels[i]]; forward reads labels without their stride, backward with."""

    @staticmethod
    def forward(ctx, logits, labels):
        ctx.save_for_backward(labels)
        ctx.shape = logits.shape
        return logits.gather(1, _misread(labels)[:logits.shape[0], None]).sum()

    @staticmethod
    def backward(ctx, g):
        (labels,) = ctx.saved_tensors
        rows = labels.reshape(-1)[:ctx.shape[0]]
        grad = torch.zeros(ctx.shape, dtype=g.dtype).scatter_(1, rows[:, None], 1.0)
        return grad * g, None


def test_the_misread_is_real_on_a_strided_index():
    # Independent of gradsmith: a strided index's values differ from what the misread sees.
    labels = torch.tensor([[0, 2], [1, 0], [2, 1]]).t()[0]  # values 0 1 2, stride 2
    assert _misread(labels).tolist() != labels.tolist()


def test_the_error_names_the_index_layout(tmp_path):
    source = tmp_path / "picked.py"
    source.write_text("import torch\n\n\n" + inspect.getsource(_misread) + "\n\n"
                      + inspect.getsource(PickedLoss))
    out, old = tmp_path / "report.json", sys.stdout
    with open(out, "w") as handle:
        sys.stdout = handle
        try:
            cli_main(["check", f"{source}::PickedLoss", "--no-isolate", "--format", "json"])
        finally:
            sys.stdout = old
    (row,) = json.loads(out.read_text())["results"]
    errors = [f for f in row["report"]["findings"] if f["severity"] == "error"]
    assert row["verdict"] == "fail" and errors, row
    assert all("non-contiguous index: labels" in f["message"] for f in errors), errors
    assert any("labels is read without its stride" in f["message"] for f in errors), errors


class Scale(torch.autograd.Function):
    """x * w for a vector w that forward reads as if contiguous."""

    @staticmethod
    def forward(ctx, x, w):
        w = torch.as_strided(w, w.shape, (1,))
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * w, (g * x).sum(0)


def test_a_weight_whose_layout_changes_results_is_named_as_misread():
    import gradsmith

    gen = torch.Generator().manual_seed(0)
    x, w = (torch.randn(3, 5, dtype=torch.float64, generator=gen),
            torch.randn(5, dtype=torch.float64, generator=gen))
    report = gradsmith.check(Scale, x, w, checks=["robustness"])
    found = [f for f in report.findings if f.code == "noncontiguous-mismatch"]
    assert [f.input for f in found] == ["w"], report
    assert "w is read as if contiguous, its stride misread" in found[0].message
