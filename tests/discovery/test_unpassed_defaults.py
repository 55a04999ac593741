"""A trailing optional forward parameter that backward has no gradient slot for is left at its
default, and a warning says a caller cannot pass it; a call in the module that passes it is
demonstrated harm, reported as wrong-grad-count (issue 18, corpus 13c held-out: a correct top-left
subsampling whose backward fills a zero tensor answers ``apply(input)``, its module's only
call, and was a false wrong-grad-count because synthesis passed ``stride``). Reduced cases,
written here; the planted wrong backward FAILs."""

import torch
from source_cases import check_rows, error_codes, load_source

SOURCE = '''
import torch


class TopLeft(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, stride=2):
        ctx.save_for_backward(x, torch.tensor([stride]))
        return x[..., ::stride, ::stride]

    @staticmethod
    def backward(ctx, grad_output):
        x, stride = ctx.saved_tensors
        stride = stride.item()
        grad_x = torch.zeros_like(x)
        grad_x[..., ::stride, ::stride] = {fill}
        return grad_x


def top_left(x):
    return TopLeft.apply(x{extra})
'''
RIGHT = {"fill": "grad_output", "extra": ""}
WRONG = {"fill": "2 * grad_output", "extra": ""}  # planted: the kept cells' gradient doubled
PASSED = {"fill": "grad_output", "extra": ", 3"}  # the module itself passes the stride


def test_the_reduced_backward_is_autograd_of_the_same_forward(tmp_path):
    path = tmp_path / "unpassed_case.py"
    path.write_text(SOURCE.format(**RIGHT))
    module = load_source(path, "unpassed_case")
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(2, 3, 5, 6, dtype=torch.float64, generator=gen, requires_grad=True)
    out = module.top_left(x)
    g = torch.randn(out.shape, dtype=torch.float64, generator=gen)
    (got,) = torch.autograd.grad(out, x, g)
    (want,) = torch.autograd.grad(x[..., ::2, ::2], x, g)
    torch.testing.assert_close(got, want)


def test_an_unanswered_default_is_left_unpassed_and_said(tmp_path):
    row = check_rows(tmp_path / "unpassed_right.py", SOURCE.format(**RIGHT))["TopLeft"]
    assert row["verdict"] == "pass", (row["reason"], row["report"]["findings"])
    assert "stride" not in row["inputs"], row["inputs"]  # apply(x), as its module calls it
    said = [f for f in row["report"]["findings"] if f["code"] == "unanswered-default"]
    assert [f["severity"] for f in said] == ["warning"], row["report"]["findings"]
    assert "stride (default 2)" in said[0]["message"], said[0]["message"]
    assert "a call that passes stride raises" in said[0]["message"], said[0]["message"]


def test_the_planted_wrong_backward_fails(tmp_path):
    row = check_rows(tmp_path / "unpassed_wrong.py", SOURCE.format(**WRONG))["TopLeft"]
    assert row["verdict"] == "fail", row["reason"]
    assert "gradient-mismatch" in error_codes(row), error_codes(row)


def test_a_call_that_passes_the_default_is_shown_as_harm(tmp_path):
    row = check_rows(tmp_path / "unpassed_passed.py", SOURCE.format(**PASSED))["TopLeft"]
    assert row["verdict"] == "fail", row["reason"]
    assert "wrong-grad-count" in error_codes(row), error_codes(row)
