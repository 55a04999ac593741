"""``pytest --gradsmith PATH``: every Function becomes a test item; inert without the flag."""

from __future__ import annotations

import re
import textwrap

import pytest

import gradsmith.checker  # noqa: F401

# pytester's in-process runs drop modules first imported inside them; torch cannot be imported
# twice in one process, so import everything heavy here, before any inner run.
import gradsmith.checkrun.task  # noqa: F401

pytest_plugins = ["pytester"]


@pytest.fixture(scope="module", autouse=True)
def _deployment_imports():
    """The inner runs' deployment checks import Dynamo and Inductor; imported first in there,
    pytester would drop them afterwards, and their re-import in a later test fails (Inductor's
    test operator library cannot be registered twice in one process)."""
    from gradsmith.checkrun.task import warm_up

    warm_up([(None, None, {"compat": True})])

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


def test_skip_points_at_the_users_class(pytester, user_file):
    result = pytester.runpytest_inprocess("--gradsmith", str(user_file), "-rs",
                                          "-p", "no:cacheprovider")
    line = user_file.read_text().splitlines().index("class NeedsMode(Function):") + 1
    result.stdout.fnmatch_lines([f"SKIPPED [[]1[]] my_ops.py:{line}: *register inputs*"])


def test_failure_lists_skipped_checks_only_with_verbose(pytester, user_file):
    quiet = pytester.runpytest_inprocess("--gradsmith", f"{user_file}::HalfGrad",
                                         "-p", "no:cacheprovider")
    verbose = pytester.runpytest_inprocess("--gradsmith", f"{user_file}::HalfGrad", "-v",
                                           "-p", "no:cacheprovider")
    for run in (quiet, verbose):
        run.assert_outcomes(failed=2)
        run.stdout.fnmatch_lines(["*ERROR gradient-mismatch*"])
    assert "  skipped " not in quiet.stdout.str()
    verbose.stdout.fnmatch_lines(["  skipped *: *"])


ASSERTING_TEST = '''
import torch
from gradsmith.testing import assert_gradients
from my_ops import HalfGrad


def test_half_grad():
    x = torch.randn(3, dtype=torch.float64, requires_grad=True)
    assert_gradients(HalfGrad, x)
'''


def test_assert_gradients_failure_hides_gradsmiths_frame(pytester, user_file):
    pytester.makepyfile(test_user=textwrap.dedent(ASSERTING_TEST))
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "test_user.py")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    # the traceback ends at the user's call, with the report as the message
    result.stdout.fnmatch_lines([">       assert_gradients(HalfGrad, x)",
                                 "E       AssertionError: gradsmith check HalfGrad: FAILED*",
                                 "E         ERROR gradient-mismatch*"])
    assert "gradsmith/testing.py" not in out and "raise AssertionError" not in out


def _outcomes(junit_xml) -> dict[tuple[str, str], str]:
    import xml.etree.ElementTree as ET

    outcomes = {}
    for case in ET.parse(junit_xml).getroot().iter("testcase"):
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        outcomes[(case.get("classname"), case.get("name"))] = kinds[0] if kinds else "passed"
    return outcomes


def test_xdist_gives_the_same_items_and_verdicts_as_a_serial_run(pytester, user_file):
    import xdist  # noqa: F401  (a dev dependency: large suites use -n)

    common = ("--gradsmith", str(user_file), "-p", "no:cacheprovider",
              "-o", "gradsmith_compat=false")  # the deployment checks add time, not coverage
    # the serial run in this process (as the tests above): only xdist's workers need their own
    serial = pytester.runpytest_inprocess(*common, "--junitxml=serial.xml")
    parallel = pytester.runpytest_subprocess(*common, "-n", "2", "--junitxml=parallel.xml",
                                             timeout=240)
    assert serial.ret == parallel.ret == pytest.ExitCode.TESTS_FAILED
    serial_outcomes = _outcomes(pytester.path / "serial.xml")
    assert {name: outcome for (_, name), outcome in serial_outcomes.items()} == {
        "Cube": "passed", "HalfGrad[small]": "failure", "HalfGrad[large]": "failure",
        "NeedsMode": "skipped"}
    assert _outcomes(pytester.path / "parallel.xml") == serial_outcomes
    parallel.stdout.fnmatch_lines(["*2 workers*"])


def test_ini_targets_run_without_the_flag_and_the_flag_replaces_them(pytester, user_file):
    (pytester.path / "sub").mkdir()
    user_file.rename(pytester.path / "sub" / "my_ops.py")
    pytester.makepyprojecttoml('[tool.pytest.ini_options]\ngradsmith_targets = ["sub/my_ops.py"]\n')
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=2, skipped=1)
    only = pytester.runpytest_inprocess("--gradsmith", "sub/my_ops.py::Cube",
                                        "-p", "no:cacheprovider")
    only.assert_outcomes(passed=1)


def test_ini_approximate_and_its_command_line_override(pytester, user_file):
    pytester.makepyprojecttoml('[tool.pytest.ini_options]\ngradsmith_approximate = true\n')
    measured = pytester.runpytest_inprocess("--gradsmith", f"{user_file}::HalfGrad",
                                            "-p", "no:cacheprovider")
    measured.assert_outcomes(failed=2)  # a 2x gradient is poor quality, measured
    assert "gradient-quality" in measured.stdout.str()
    assert "gradient-mismatch" not in measured.stdout.str()
    judged = pytester.runpytest_inprocess("--gradsmith", f"{user_file}::HalfGrad",
                                          "-o", "gradsmith_approximate=false",
                                          "-p", "no:cacheprovider")
    judged.assert_outcomes(failed=2)
    assert "gradient-mismatch" in judged.stdout.str()
    assert "gradient-quality" not in judged.stdout.str()


@pytest.mark.parametrize("ini, words", [
    ("gradsmith_target = ['my_ops.py']",
     ["unknown ini option 'gradsmith_target'",
      "valid options: gradsmith_approximate, gradsmith_compat, gradsmith_require, "
      "gradsmith_targets"]),
    ("gradsmith_require = ['second_order']",
     ["gradsmith_require has unknown name(s) 'second_order'", "second-order"]),
    ("gradsmith_compat = 'sometimes'",
     ["gradsmith_compat must be true or false", "sometimes", "gradsmith_compat = true"]),
    ("gradsmith_approximate = 'maybe'",
     ["gradsmith_approximate must be true or false", "maybe"]),
])
def test_bad_ini_options_are_usage_errors(pytester, user_file, ini, words):
    pytester.makepyprojecttoml(f"[tool.pytest.ini_options]\n{ini}\n")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    for w in words:
        result.stderr.fnmatch_lines([f"*{w}*"])


NO_GRAD_CUBE = '''
import torch
from torch.autograd import Function
import gradsmith


@gradsmith.example(lambda: (torch.randn(5, dtype=torch.float64, requires_grad=True),))
class NoGradCube(Function):
    @staticmethod
    def forward(ctx, x):
        with torch.no_grad():
            d = 3 * x * x
        ctx.save_for_backward(d)
        return x ** 3

    @staticmethod
    def backward(ctx, g):
        (d,) = ctx.saved_tensors
        return g * d
'''


def test_ini_require_second_order_fails_a_missing_second_derivative(pytester):
    # first order right, double backward silently 0 (issue 18): a warning, the item passes
    pytester.makepyfile(cube_ops=textwrap.dedent(NO_GRAD_CUBE))
    plain = pytester.runpytest_inprocess("--gradsmith", "cube_ops.py", "-p", "no:cacheprovider")
    plain.assert_outcomes(passed=1)
    pytester.makepyprojecttoml('[tool.pytest.ini_options]\ngradsmith_require = ["second-order"]\n')
    required = pytester.runpytest_inprocess("--gradsmith", "cube_ops.py", "-p",
                                            "no:cacheprovider")
    required.assert_outcomes(failed=1)
    assert "second-order is required" in required.stdout.str()


def test_ini_compat_false_leaves_out_the_deployment_checks(pytester, user_file):
    pytester.makepyprojecttoml('[tool.pytest.ini_options]\ngradsmith_compat = false\n')
    quick = pytester.runpytest_inprocess("--gradsmith", f"{user_file}::HalfGrad", "-k", "small",
                                         "-p", "no:cacheprovider")
    full = pytester.runpytest_inprocess("--gradsmith", f"{user_file}::HalfGrad", "-k", "small",
                                        "-o", "gradsmith_compat=true", "-p", "no:cacheprovider")
    for run in (quick, full):
        run.assert_outcomes(failed=1)
    header = re.compile(r"FAILED \(.*checks: (.*)\)")
    # the report repeats in the short summary when pytest sees CI=1 (it does not truncate there)
    quick_checks = set(header.findall(quick.stdout.str()))
    full_checks = set(header.findall(full.stdout.str()))
    assert len(quick_checks) == 1 and len(full_checks) == 1, (quick_checks, full_checks)
    (quick_checks,), (full_checks,) = quick_checks, full_checks
    assert "compile" not in quick_checks and "compile" in full_checks
