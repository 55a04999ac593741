"""The public API: accepted targets and arguments, options, Report/Finding, side effects."""

import json
import warnings

import pytest
import torch
from torch.autograd import Function

import gradsmith
from gradsmith import GradsmithError
from gradsmith.checker import CHECK_NAMES, Finding, Report
from gradsmith.testing import assert_gradients


class Tanh(Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * (1 - y * y)


class TanhWrong(Tanh):
    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * (1 - y)


class Warns(Tanh):
    @staticmethod
    def forward(ctx, x):
        warnings.warn("user code warns", UserWarning, stacklevel=1)
        return Tanh.forward(ctx, x)


def _x(*shape, seed=0, dtype=torch.float64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


@pytest.mark.parametrize("target", [Tanh, Tanh.apply, lambda x: Tanh.apply(x)],
                         ids=["class", "apply", "callable"])
def test_accepts_class_apply_and_callable(target):
    assert gradsmith.check(target, _x(4)).passed
    bad = TanhWrong if target is Tanh else TanhWrong.apply
    if target in (Tanh, Tanh.apply):
        assert not gradsmith.check(bad, _x(4)).passed


def test_user_tensors_rng_and_threads_untouched():
    # two threads, as a user's process has by default: the check drops to one for small inputs
    # and must give them back (the test run itself uses one: see conftest.py at the root)
    outer = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        x = _x(3, 2, dtype=torch.float32).requires_grad_(True)
        before = x.detach().clone()
        state = torch.get_rng_state()
        threads = torch.get_num_threads()
        gradsmith.check(Tanh, x)
        assert torch.equal(x.detach(), before)
        assert x.grad is None and x.dtype == torch.float32 and x.requires_grad
        assert torch.equal(torch.get_rng_state(), state)
        assert torch.get_num_threads() == threads == 2
    finally:
        torch.set_num_threads(outer)


def test_nested_and_none_arguments():
    def fn(xs, scale, bias=None):
        out = xs[0] * xs[1]["w"] * scale
        return out if bias is None else out + bias

    report = gradsmith.check(fn, [_x(3), {"w": _x(3, seed=1)}], 2.0, None)
    assert report.passed, str(report)


def test_only_tensors_requiring_grad_are_differentiated():
    seen = []

    def fn(a, b):
        seen.append(b.requires_grad)
        return a * b

    gradsmith.check(fn, _x(3).requires_grad_(True), _x(3, seed=1), checks=["gradients"])
    assert not any(seen)


def test_report_is_readable_and_json_ready():
    report = gradsmith.check(TanhWrong, _x(3, 2))
    assert isinstance(report, Report) and not report.passed
    text = str(report)
    assert "TanhWrong" in text and "gradient-mismatch" in text and "fix:" in text
    data = json.loads(json.dumps(report.to_dict()))
    assert data["passed"] is False and data["name"] == "TanhWrong"
    assert any(f["code"] == "gradient-mismatch" for f in data["findings"])
    assert set(data["checks"]) <= set(CHECK_NAMES)
    finding = report.errors[0]
    assert isinstance(finding, Finding) and finding.hint and finding.input == "x"


def test_jacobian_block_matches_plain_pytorch():
    x = _x(3, 2)
    report = gradsmith.check(TanhWrong, x, checks=["gradients"])
    analytic, numerical = report.jacobians["x"]
    reference = torch.autograd.functional.jacobian(torch.tanh, x).reshape(6, 6)
    torch.testing.assert_close(numerical, reference, atol=1e-8, rtol=1e-6)
    wrong = torch.diag((1 - torch.tanh(x)).reshape(-1))
    torch.testing.assert_close(analytic, wrong)


def test_checks_subset_name_and_elapsed():
    report = gradsmith.check(Tanh, _x(4), checks=["gradients", "hygiene"], name="tanh")
    assert report.checks == ["gradients", "hygiene"] and report.name == "tanh"
    assert report.elapsed > 0 and report.saved_bytes == 4 * 8


def test_float32_inputs_do_not_false_alarm():
    x = _x(50, dtype=torch.float32) * 3
    assert gradsmith.check(Tanh, x).passed


def test_user_warnings_become_info_findings():
    report = gradsmith.check(Warns, _x(3), checks=["gradients"])
    assert report.passed
    assert "user-warning" in report.codes("info")


def test_assert_gradients():
    assert_gradients(Tanh, _x(3))
    with pytest.raises(AssertionError, match="gradient-mismatch"):
        assert_gradients(TanhWrong, _x(3))


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"tolerance": 1}, "unknown option"),
    ({"atol": -1.0}, "atol must be a number >= 0, got -1.0"),
    ({"rtol": "x"}, "rtol must be a number"),
    ({"checks": ["gradient"]}, r"unknown check name\(s\) \['gradient'\]"),
    ({"exact_max": 1.5}, "exact_max must be an int"),
])
def test_bad_options(kwargs, match):
    with pytest.raises(GradsmithError, match=match):
        gradsmith.check(Tanh, _x(3), **kwargs)


def test_bad_targets_and_arguments():
    with pytest.raises(GradsmithError, match="fn must be a torch.autograd.Function"):
        gradsmith.check(42, _x(3))
    with pytest.raises(GradsmithError, match="no floating-point or complex tensor"):
        gradsmith.check(Tanh, torch.arange(3))


def test_crashing_user_code_is_a_finding_not_a_traceback():
    def boom(x):
        raise RuntimeError("kaboom")

    report = gradsmith.check(boom, _x(3))
    assert not report.passed and report.codes("error") == {"forward-error"}
    assert "kaboom" in report.errors[0].message


def test_registered_examples_are_used_without_arguments():
    @gradsmith.example(lambda: (_x(3),), name="small")
    @gradsmith.example(lambda: (_x(2, 2, seed=1),), name="square")
    class Registered(TanhWrong):
        pass

    report = gradsmith.check(Registered)
    assert not report.passed
    assert {f.details["example"] for f in report.errors} == {"small", "square"}
    with pytest.raises(GradsmithError, match="no example inputs for Tanh"):
        gradsmith.check(Tanh)


def test_callable_wrapping_a_once_differentiable_function_skips_second_order():
    from torch.autograd.function import once_differentiable

    class Cube(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x**3

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x**2 * g

    report = gradsmith.check(lambda x: Cube.apply(x) * 2, torch.randn(5, dtype=torch.float64))
    assert report.passed, report
    assert "once_differentiable" in report.skipped["second_order"]


def test_callable_wrapping_a_silently_wrong_backward_is_still_checked_for_second_order():
    class Cube(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x**3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x.detach() ** 2 * g  # second derivative silently zero

    report = gradsmith.check(lambda x: Cube.apply(x) * 2, torch.randn(5, dtype=torch.float64))
    # its derivative in x is 0: missing, a warning (issue 18)
    assert "double-backward-unsupported" in report.codes("warning"), str(report)


def test_report_text_groups_checks_skipped_for_the_same_reason():
    class NoGrads(Function):
        @staticmethod
        def forward(ctx, x, k):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return None  # one value for two inputs: a structural failure

    text = str(gradsmith.check(NoGrads, torch.randn(3, dtype=torch.float64), 3))
    skip_lines = [line for line in text.splitlines() if line.strip().startswith("skipped")]
    reasons = [line.split(": ", 1)[1] for line in skip_lines]
    assert len(reasons) == len(set(reasons)), text  # each reason stated once
    assert "gradients" in text and "wrong-grad-count" in text


def test_inputs_held_constant_are_named_and_their_gradient_is_not_judged():
    class WeightedMSE(Function):
        @staticmethod
        def forward(ctx, x, target):
            ctx.save_for_backward(x, target)
            return ((x - target) ** 2).sum()

        @staticmethod
        def backward(ctx, g):
            x, target = ctx.saved_tensors
            return 2 * (x - target) * g, None  # no gradient for the target, on purpose

    x = torch.randn(4, dtype=torch.float64, requires_grad=True)
    target = torch.randn(4, dtype=torch.float64)
    report = gradsmith.check(WeightedMSE, x, target)
    assert report.passed, report
    (info,) = [f for f in report.findings if f.code == "constant-input"]
    assert info.severity == "info" and info.details["inputs"] == ["target"]
    # with no input marked, every floating input is differentiated: the None is a wrong gradient
    report = gradsmith.check(WeightedMSE, x.detach(), target)
    assert "gradient-mismatch" in {f.code for f in report.findings}
    assert "constant-input" not in {f.code for f in report.findings}
