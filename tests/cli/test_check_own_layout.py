"""A Function that passes on its own layout and fails only where a parameter takes another
shape (issue 18, "Shapes matter as much"): with zero configuration the guessed shape of a
parameter whose name says nothing (``w``, not ``bias``) was the input's full shape, and a
correct row-vector add FAILed with grad-shape-mismatch. Now the set is checked again with the
parameter shaped as backward's gradient: a warning names that shape, and the verdict is what
the check finds there (a mean instead of a sum is still a gradient-mismatch)."""

import json

import torch

ROW_ADD = """
class RowAdd(Function):
    @staticmethod
    def forward(ctx, x, w):
        return x + w

    @staticmethod
    def backward(ctx, g):
        return g, g.{reduce}(0)
"""


def _row(gradsmith_cli, write, reduce):
    path = write("rows.py", ROW_ADD.format(reduce=reduce))
    code, out, _ = gradsmith_cli(path, "--no-isolate", "--format", "json")
    row, = json.loads(out)["results"]
    return code, row


def test_a_row_vector_add_passes_on_its_own_layout_with_a_warning(gradsmith_cli, write):
    code, row = _row(gradsmith_cli, write, "sum")
    assert (code, row["verdict"]) == (0, "pass"), row["text"]
    found = [f for f in row["report"]["findings"] if f["code"] == "assumed-shape"]
    assert found and found[0]["severity"] == "warning" and found[0]["input"] == "w"
    checked = tuple(found[0]["details"]["checked"])
    assert "(4,)" in found[0]["message"] and checked == (4,)
    assert "w (4,)" in row["inputs"]
    # by hand: x + w with w of shape (4,) has gradient g.sum(0) for w
    x, w = torch.randn(3, 4, dtype=torch.float64), torch.randn(4, dtype=torch.float64)
    w.requires_grad_()
    g = torch.randn(3, 4, dtype=torch.float64)
    (x + w).backward(g)
    torch.testing.assert_close(w.grad, g.sum(0))


def test_a_mean_instead_of_a_sum_is_still_a_gradient_mismatch(gradsmith_cli, write):
    code, row = _row(gradsmith_cli, write, "mean")
    assert (code, row["verdict"]) == (1, "fail")
    codes = {f["code"] for f in row["report"]["findings"] if f["severity"] == "error"}
    assert "gradient-mismatch" in codes and "grad-shape-mismatch" not in codes


def test_a_registered_example_keeps_its_shape_error(gradsmith_cli, write):
    path = write("rows.py", ROW_ADD.format(reduce="sum"), """
gradsmith.example(lambda: (torch.randn(3, 4, dtype=torch.float64, requires_grad=True),
                           torch.randn(3, 4, dtype=torch.float64, requires_grad=True)))(RowAdd)
""")
    code, out, _ = gradsmith_cli(path, "--no-isolate", "--format", "json")
    row, = json.loads(out)["results"]
    assert row["verdict"] == "fail"  # the user's shapes are not a guess
    assert "grad-shape-mismatch" in {f["code"] for f in row["report"]["findings"]}
