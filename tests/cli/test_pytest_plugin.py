"""``pytest --gradsmith PATH``: every Function becomes a test item; inert without the flag."""

from __future__ import annotations

import textwrap

import pytest

import gradsmith.checker  # noqa: F401

# pytester's in-process runs drop modules first imported inside them; torch cannot be imported
# twice in one process, so import everything heavy here, before any inner run.
import gradsmith.isolation.tasks  # noqa: F401

pytest_plugins = ["pytester"]

USER_FILE = '''
import torch
from torch.autograd import Function
import gradsmith


class Cube(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 3 * x * x * grad


@gradsmith.example(lambda: (torch.randn(3, dtype=torch.float64, requires_grad=True),),
                   name="small")
@gradsmith.example(lambda: (torch.randn(5, dtype=torch.float64, requires_grad=True),),
                   name="large")
class HalfGrad(Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad  # should be 2 * grad


class NeedsMode(Function):
    @staticmethod
    def forward(ctx, x, mode):
        raise ValueError("mode must be 'fast'")

    @staticmethod
    def backward(ctx, grad):
        return grad, None
'''


@pytest.fixture
def user_file(pytester: pytest.Pytester):
    pytester.makepyfile(my_ops=textwrap.dedent(USER_FILE))
    return pytester.path / "my_ops.py"


def test_items_per_function_and_example_with_report_on_failure(pytester, user_file):
    result = pytester.runpytest_inprocess("--gradsmith", str(user_file), "-rs",
                                          "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=2, skipped=1)
    result.stdout.fnmatch_lines([
        "*my_ops.py::HalfGrad?small?*",
        "*gradient-mismatch*",
        "*SKIPPED*register inputs*",
    ])


def test_k_selects_gradsmith_items(pytester, user_file):
    result = pytester.runpytest_inprocess("--gradsmith", str(user_file), "-k", "Cube",
                                          "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, deselected=3)


def test_plugin_is_inert_without_the_flag(pytester, user_file):
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED


def test_bad_path_is_a_usage_error(pytester):
    result = pytester.runpytest_inprocess("--gradsmith", "nope.py", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--gradsmith*no such file or directory*"])
