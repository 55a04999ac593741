"""A crash right after ``print(..., end="")``: the row's "last output" is the user's line and
frames, not gradsmith's (faulthandler's text then starts in the middle of a line)."""

from __future__ import annotations

import json

CRASHES = '''
import os


@gradsmith.example(lambda: (torch.ones(3, dtype=torch.float64, requires_grad=True),))
class Aborts(Function):
    @staticmethod
    def forward(ctx, x):
        print("an earlier line")
        print("my last words", end="")
        os.abort()

    @staticmethod
    def backward(ctx, grad):
        return grad
'''


def test_last_output_after_a_partial_line_is_the_users(write, gradsmith_cli) -> None:
    write("crashes.py", CRASHES)
    code, out, _ = gradsmith_cli("crashes.py", "--no-compat", "--format", "json",
                                 "--timeout", "120")
    row = json.loads(out)["results"][0]
    assert code == 1 and row["error"] == "crash"
    tail = row["reason"].split("its last output:\n", 1)[1]
    assert "my last words" in tail and "an earlier line" in tail
    assert "crashes.py\", line 14 in forward" in tail  # the user's frame (os.abort())
    assert "/gradsmith/" not in tail  # none of gradsmith's frames
