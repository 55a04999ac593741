"""Start-up: the ``gradsmith check`` process itself never imports torch (a second on an idle
machine, several on a busy one, before anything could be on screen); only the worker does."""

from __future__ import annotations

import subprocess
import sys

BAD = """
@gradsmith.example(_x)
class WrongSquare(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 3 * x * grad
"""

PROBE = """
import sys
from gradsmith.cli import main
code = main(sys.argv[1:])
print("torch imported" if "torch" in sys.modules else "torch not imported", file=sys.stderr)
sys.exit(code)
"""


def test_the_command_line_process_never_imports_torch(tmp_path, write, procs):
    write("ops.py", procs.good, BAD)
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, "check", "ops.py", "--format", "json", "--repro", "repro",
         "--html", "report.html", "--timeout", "120"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr  # WrongSquare fails: the full output path ran
    assert "torch not imported" in proc.stderr
    assert (tmp_path / "report.html").stat().st_size > 0 and any((tmp_path / "repro").iterdir())


def test_the_compatibility_columns_match_the_verifier():
    from gradsmith.checker.deploy.matrix import COLUMNS
    from gradsmith.cli._compat_output import COLUMNS as SHOWN

    assert SHOWN == COLUMNS
