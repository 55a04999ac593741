"""The compatibility matrix on the command line: text (piped), JSON, HTML, --no-compat."""

from __future__ import annotations

import json

OLD_STYLE = """
@gradsmith.example(lambda: (torch.randn(3, 4, dtype=torch.float64),))
class OldTanh(Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * (1 - y * y)
"""

MODERN = """
@gradsmith.example(lambda: (torch.randn(3, 4, dtype=torch.float64),))
class Tanh(Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return torch.tanh(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * (1 - y * y)
"""


def test_text_matrix_has_one_short_row_per_function(write, gradsmith_cli):
    path = write("ops.py", OLD_STYLE, MODERN)
    code, out, _ = gradsmith_cli(path, "--no-isolate")
    assert code == 0
    matrix = out.split("compatibility", 1)[1]
    header = next(line for line in matrix.splitlines() if "Function" in line)
    assert header.split() == ["Function", "eager", "compile", "export", "amp", "fp32", "ckpt",
                              "func"]
    rows = {line.split()[0]: line.split()[1:] for line in matrix.splitlines()
            if "ops.py::" in line}
    assert rows["ops.py::Tanh"] == ["ok"] * 7
    assert rows["ops.py::OldTanh"] == ["ok"] * 6 + ["warn"]
    assert all(len(line) <= 80 for line in matrix.splitlines() if "ops.py::" in line)
    assert "func-needs-setup-context" in out  # the warning itself is listed above the matrix


def test_json_carries_the_matrix_and_no_compat_drops_it(write, gradsmith_cli):
    path = write("ops.py", OLD_STYLE)
    _, out, _ = gradsmith_cli(path, "--no-isolate", "--format", "json")
    (row,) = json.loads(out)["results"]
    compat = row["report"]["compat"]
    assert compat["torch.func"]["status"] == "warn"
    assert compat["torch.func"]["codes"] == ["func-needs-setup-context"]
    assert {"compile", "export", "autocast", "precision", "checkpoint"} <= set(row["checks"])

    code, out, _ = gradsmith_cli(path, "--no-isolate", "--format", "json", "--no-compat")
    (row,) = json.loads(out)["results"]
    assert code == 0 and row["report"]["compat"] == {}
    assert not {"compile", "export", "torch_func"} & set(row["checks"])
    _, text, _ = gradsmith_cli(path, "--no-isolate", "--no-compat")
    assert "compatibility" not in text


def test_verbose_lists_the_reasons_of_na_cells(write, gradsmith_cli):
    path = write("ops.py", OLD_STYLE.replace("torch.randn(3, 4", "torch.rand(3, 4") + """
@gradsmith.example(lambda: (torch.randn(5, dtype=torch.float64),))
class Drop(Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        keep = (torch.rand_like(x) > 0.5).to(x.dtype)
        return x * keep

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output != 0)

    @staticmethod
    def backward(ctx, g):
        (keep,) = ctx.saved_tensors
        return g * keep
""")
    _, out, _ = gradsmith_cli(path, "--no-isolate", "-v", "-k", "Drop")
    assert "ops.py::Drop: float32 n/a: the Function draws random numbers" in out


def test_html_report_has_the_matrix_with_notes(write, gradsmith_cli, tmp_path):
    path = write("ops.py", OLD_STYLE)
    report = tmp_path / "report.html"
    gradsmith_cli(path, "--no-isolate", "--html", report)
    page = report.read_text()
    assert "<h2>Compatibility</h2>" in page
    assert "title='func-needs-setup-context; torch.func.grad refuses" in page
