"""``pytest --gradsmith``: a Function raising ``KeyboardInterrupt`` fails its own item; every
other item still runs, with pytest-xdist (``-n 2``) and without (issue 20)."""

from __future__ import annotations

import textwrap

import pytest

# pytester's in-process run drops the modules first imported inside it: import the plugin's
# check task here, before it, as tests/cli/test_pytest_plugin.py does.
import gradsmith.checkrun.task  # noqa: F401

pytest_plugins = ["pytester"]

USER_FILE = '''
import torch
from torch.autograd import Function
import gradsmith


def _x():
    return (torch.randn(4, dtype=torch.float64, requires_grad=True),)


@gradsmith.example(_x)
class Square(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 2 * x * grad


@gradsmith.example(_x)
class InterruptsForward(Function):
    @staticmethod
    def forward(ctx, x):
        raise KeyboardInterrupt("from forward")

    @staticmethod
    def backward(ctx, grad):
        return grad


@gradsmith.example(_x)
class InterruptsBackward(Function):
    @staticmethod
    def forward(ctx, x):
        return x * 3

    @staticmethod
    def backward(ctx, grad):
        raise KeyboardInterrupt("from backward")


@gradsmith.example(_x)
class Triple(Function):
    @staticmethod
    def forward(ctx, x):
        return x * 3

    @staticmethod
    def backward(ctx, grad):
        return 3 * grad


@gradsmith.example(_x)
class Exp(Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.exp(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * y
'''


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["in-process", "xdist"])
def test_keyboard_interrupt_from_a_function_fails_only_its_item(pytester, workers):
    pytester.makepyfile(interrupting=textwrap.dedent(USER_FILE))
    args = ("--gradsmith", "interrupting.py", "-p", "no:cacheprovider", "-o",
            "gradsmith_compat=false", "-rf", *workers)
    # Without xdist the session runs in this process (a KeyboardInterrupt that escaped the
    # plugin ends the inner session, reported as Interrupted, and is not raised again here:
    # this test fails, the suite goes on); xdist's workers are processes of their own.
    result = (pytester.runpytest_subprocess(*args, timeout=600) if workers
              else pytester.runpytest_inprocess(*args, no_reraise_ctrlc=True))
    result.assert_outcomes(passed=3, failed=2)
    out = result.stdout.str()
    assert "Interrupted" not in out and "KeyboardInterrupt" in out
    for name, where in (("InterruptsForward", "from forward"),
                        ("InterruptsBackward", "from backward")):
        assert f"FAILED interrupting.py::{name}" in out
        assert f"the Function raised KeyboardInterrupt: {where} at " in out
