"""How ``gradsmith check`` reads when piped (CI logs): no hard wrapping, no per-Function noise
unless ``-v``; and where each Function is defined (JSON ``file`` and ``line``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import gradsmith.examples.activations

# Every element of w's gradient is wrong, so the finding lists many `w[i, j]` tokens: a long
# line that a 110-column wrap used to split as `w[2, ⏎ 2]`.
WIDE_BAD = """
@gradsmith.example(lambda: (torch.randn(3, 6, dtype=torch.float64, requires_grad=True),
                            torch.randn(6, 6, dtype=torch.float64, requires_grad=True)))
class WideBadMatmul(Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x @ w

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        return grad @ w.t(), -(x.t() @ grad)
"""


def _finding_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.lstrip().startswith(("ERROR ", "WARNING "))]


def test_piped_output_keeps_every_finding_on_one_line(write, gradsmith_cli):
    path = write("a_module_with_a_rather_long_name_to_push_lines_wide.py", WIDE_BAD)
    code, out, _ = gradsmith_cli(path, "--no-isolate")
    assert code == 1
    (line,) = [x for x in _finding_lines(out) if "gradient-mismatch" in x]
    # the whole message on that one line: the element list, the count and the worst element
    assert len(re.findall(r"w\[\d+, \d+\]", line)) >= 5 and "elements)" in line, line
    assert len(line) > 110  # it was not wrapped
    # and nowhere a token cut at the end of a line
    assert not [x for x in out.splitlines() if re.search(r"\[\d+,\s*$", x)]
    fix = out.splitlines()[out.splitlines().index(line) + 1]
    assert fix.lstrip().startswith("fix: ") and fix.rstrip().endswith("patterns"), fix


def test_piped_table_rows_are_one_line_each(write, snippets, gradsmith_cli):
    path = write("ops.py", snippets.good, snippets.bad)
    _, out, _ = gradsmith_cli(path, "--no-isolate", "-v")  # -v: with the checks run
    rows = [line for line in out.splitlines() if "ops.py::" in line and "│" in line]
    assert len(rows) == 2
    assert all("structure" in r and "hygiene" in r for r in rows), rows  # checks not folded


def test_skipped_checks_are_listed_only_with_verbose(write, snippets, gradsmith_cli):
    path = write("ops.py", snippets.bad)
    _, out, _ = gradsmith_cli(path, "--no-isolate")
    _, verbose, _ = gradsmith_cli(path, "--no-isolate", "-v")
    _, doc, _ = gradsmith_cli(path, "--no-isolate", "--format", "json")
    skipped = json.loads(doc)["results"][0]["report"]["skipped"]
    assert skipped, "the example must skip some checks for this test to mean anything"
    assert not re.search(r"^\s+skipped ", out, flags=re.M)
    listed = re.findall(r"^\s+skipped ([^:]+): (.*)$", verbose, flags=re.M)
    assert {reason for _, reason in listed} == set(skipped.values())
    assert sorted(n for names, _ in listed for n in names.split(", ")) == sorted(skipped)
    # nothing else differs: the same codes either way (by default repeats are merged)
    assert {x.split()[1].rstrip(":") for x in _finding_lines(out)} == \
        {x.split()[1].rstrip(":") for x in _finding_lines(verbose)}


def test_json_gives_file_and_line_of_each_function(write, snippets, gradsmith_cli):
    path = write("ops.py", snippets.good, snippets.bad)
    _, out, _ = gradsmith_cli(path, "--no-isolate", "--format", "json")
    lines = path.read_text().splitlines()
    for r in json.loads(out)["results"]:
        name = r["name"].split("::")[1]
        assert r["file"] == "ops.py"  # relative to the working directory, like the target
        assert lines[r["line"] - 1].startswith(f"class {name}("), (name, r["line"])


def test_json_file_outside_the_working_directory_is_absolute(gradsmith_cli):
    _, out, _ = gradsmith_cli("gradsmith.examples.activations::Exp", "--no-isolate",
                              "--format", "json")
    (r,) = json.loads(out)["results"]
    source = Path(gradsmith.examples.activations.__file__).resolve()
    assert Path(r["file"]) == source and Path(r["file"]).is_absolute()
    assert source.read_text().splitlines()[r["line"] - 1].startswith("class Exp(")


def test_json_import_failure_has_no_file(write, snippets, gradsmith_cli):
    path = write("broken.py", snippets.raises_at_import)
    _, out, _ = gradsmith_cli(path, "--no-isolate", "--format", "json")
    (r,) = json.loads(out)["results"]
    assert r["error"] == "import" and r["file"] is None and r["line"] is None


def test_terminal_wrapping_keeps_indices_whole_with_a_hanging_indent():
    from gradsmith.cli._check_output import wrap_line

    tokens = [f"w[{i}, {j}]" for i in range(4) for j in range(5)]
    line = "  ERROR gradient-mismatch [w]: wrong at " + ", ".join(tokens) + " (20 of 20 elements)"
    for width in range(30, 130, 7):
        wrapped = wrap_line(line, width).splitlines()
        assert all(len(x) <= width for x in wrapped), width
        assert wrapped[0].startswith("  ERROR") and all(x.startswith(" " * 6) for x in wrapped[1:])
        assert re.findall(r"w\[\d+, \d+\]", "\n".join(wrapped)) == tokens  # none split
        assert " ".join(x.strip() for x in wrapped) == line.strip()  # nothing lost or added
