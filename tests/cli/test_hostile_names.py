"""Names from user code (example names, file names) are shown, never obeyed, in check output.

Control sequences (a clear screen, an OSC 52 clipboard write, BEL, carriage return) never
reach the terminal raw, on stdout or on stderr's "still working" line; a line break in a
name cannot forge a summary line in piped output.
"""

from __future__ import annotations

import re
import sys
import time

import pytest

HOSTILE = "ex\x1b[2J\x1b]52;c;ZXZpbA==\x07\r\n9 passed, 0 failed, 0 skipped in 0.1 s\n"
FILE = "f\x1b]0;T\x07\n7 passed, 0 failed, 0 skipped in 0.1 s\n.py"

BODY = f'''
import torch
from torch.autograd import Function
import gradsmith


@gradsmith.example(lambda: (torch.randn(3, dtype=torch.float64, requires_grad=True),),
                   name={HOSTILE!r})
@gradsmith.example(lambda: (torch.randn(2, dtype=torch.float64, requires_grad=True),),
                   name="plain")
class Wrong(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x
'''
RAW = ("\x1b", "\x07", "\r")
SUMMARY = re.compile(r"^\d+ passed, \d+ failed, \d+ skipped in [\d.]+ s$")


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory):
    """One isolated run for the tests below, which read the same output (issue 21: each run
    starts a worker that imports torch): (exit code, stdout, stderr), as ``gradsmith_cli``
    gives them, stdout and stderr being files, not terminals."""
    from gradsmith.cli import main

    folder = tmp_path_factory.mktemp("hostile")
    for name in ("hostile.py", FILE):
        (folder / name).write_text(BODY)
    logs = tmp_path_factory.mktemp("hostile-output")
    out_file, err_file = logs / "out.txt", logs / "err.txt"
    with pytest.MonkeyPatch.context() as patch, open(out_file, "w") as out, \
            open(err_file, "w") as err:
        patch.chdir(folder)  # rows are labelled relative to the working directory
        patch.setattr(sys, "stdout", out)
        patch.setattr(sys, "stderr", err)
        code = main(["check", ".", "--no-compat", "--timeout", "120"])
    return code, out_file.read_text(), err_file.read_text()


def test_piped_output_shows_control_characters_instead_of_obeying_them(hostile_run) -> None:
    code, out, err = hostile_run
    assert code == 1
    for raw in RAW:
        assert raw not in out and raw not in err
    assert "\\x1b]52;c;ZXZpbA==\\x07" in out  # shown, visibly
    assert "f\\x1b]0;T\\x07\\n7 passed" in out


def test_a_line_break_in_a_name_cannot_forge_the_summary_line(hostile_run) -> None:
    _, out, _ = hostile_run
    summaries = [line for line in out.splitlines() if SUMMARY.match(line.strip())]
    assert summaries == ["0 passed, 4 failed, 0 skipped in " + summaries[0].split(" in ")[1]]
    # every row (2 files x 2 examples) is one table line and one FAIL heading
    assert sum(line.startswith("── FAIL ") for line in out.splitlines()) == 4


def test_still_working_line_on_stderr_shows_control_characters(capsys) -> None:
    from gradsmith.cli._check_output import Output

    output = Output("text")  # stdout captured: not a terminal, so the stderr line is used
    output._started = time.monotonic() - 11  # past the 10 s after which the line is said
    output.status(f"{FILE}::Wrong[{HOSTILE}]: structure")
    err = capsys.readouterr().err
    for raw in RAW:
        assert raw not in err
    assert err.count("\n") == 1 and err.startswith("gradsmith check: still working: f\\x1b]0;")
