"""Verdicts users can trust: legal shapes are not errors, a wrong first-order backward is
reported once (its root cause), and hints name only what the code really does."""

import pytest
import torch
from corpus import bugs_structure
from torch.autograd import Function

import gradsmith


def _r(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed),
                       dtype=torch.float64, requires_grad=True)


@pytest.mark.parametrize("fn, args", [
    (bugs_structure.BiasNotReduced, lambda: (_r(4, 3), _r(3, seed=1))),
    (bugs_structure.PerRowWeightGrad, lambda: (_r(4, 3), _r(3, seed=1))),
])
def test_broadcast_shaped_gradient_is_a_warning_like_gradcheck_accepts_it(fn, args):
    assert torch.autograd.gradcheck(fn.apply, args())  # the independent reference
    report = gradsmith.check(fn, *args())
    assert report.passed, str(report)
    (finding,) = [f for f in report.findings if f.code == "broadcast-grad"]
    assert finding.severity == "warning" and finding.input in ("bias", "w")
    assert finding.details == {"expected": [3], "got": [4, 3]}
    assert "sum_to_size" in finding.hint


@pytest.mark.parametrize("fn, args", [
    (bugs_structure.ColumnGrad, lambda: (_r(4),)),
    (bugs_structure.TransposedGrad, lambda: (_r(3, 4),)),
])
def test_shape_autograd_rejects_stays_an_error(fn, args):
    with pytest.raises(RuntimeError, match="invalid gradient"):
        torch.autograd.gradcheck(fn.apply, args())
    report = gradsmith.check(fn, *args())
    assert "grad-shape-mismatch" in report.codes("error")


class ExpSavedOutputWrong(Function):
    """1.5 e^x for e^x, saving the output: double backward runs this backward again."""

    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return 1.5 * y * g


def test_wrong_first_order_is_reported_once_not_echoed_by_second_order():
    x = _r(5)
    # The echo exists: plain PyTorch's double backward disagrees with the derivative of the
    # (wrong) backward itself, 1.5 e^x; it is 2.25 e^x.
    (g,) = torch.autograd.grad(ExpSavedOutputWrong.apply(x).sum(), x, create_graph=True)
    (gg,) = torch.autograd.grad(g.sum(), x)
    torch.testing.assert_close(gg, 2.25 * x.detach().exp())
    report = gradsmith.check(ExpSavedOutputWrong, x)
    assert report.codes("error") == {"gradient-mismatch"}, str(report)
    assert "gradient-mismatch on x" in report.skipped["second_order"]


class SigmoidDetachedInBackward(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.sigmoid(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(x).detach()
        return g * s * (1 - s)


class SigmoidSavedIntermediate(Function):
    @staticmethod
    def forward(ctx, x):
        s = torch.sigmoid(x)
        ctx.save_for_backward(s * (1 - s))
        return s

    @staticmethod
    def backward(ctx, g):
        (ds,) = ctx.saved_tensors
        return g * ds


def test_double_backward_hint_names_only_what_backward_uses():
    x = _r(4)
    with pytest.raises(RuntimeError):  # gradgradcheck agrees both are wrong
        torch.autograd.gradgradcheck(SigmoidDetachedInBackward.apply, (x,))
    detached = gradsmith.check(SigmoidDetachedInBackward, x)
    (f,) = [f for f in detached.findings if f.code == "double-backward-unsupported"]
    assert "`.detach()`" in f.hint
    saved = gradsmith.check(SigmoidSavedIntermediate, x)
    (f,) = [f for f in saved.findings if f.code == "double-backward-unsupported"]
    assert ".detach" not in f.hint and "saved as intermediates" in f.hint
    assert "once_differentiable" in f.hint


class SinScaled(Function):
    """An 'approximate' backward: (1 + err) cos(x), err set per subclass."""

    err = 0.0

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin()

    @classmethod
    def backward(cls, ctx, g):
        (x,) = ctx.saved_tensors
        return (1 + cls.err) * x.cos() * g


class SinOff21(SinScaled):
    err = 0.21


class SinOffHalfPercent(SinScaled):
    err = 0.005


def _quality(report):
    (f,) = [f for f in report.findings if f.code == "gradient-quality"]
    return f


@pytest.mark.parametrize("fn, passes", [(SinOff21, False), (SinOffHalfPercent, True)])
def test_approximate_mode_has_a_verdict_with_default_thresholds(fn, passes):
    x = _r(6)
    report = gradsmith.check(fn, x, approximate=True)
    assert report.passed == passes, str(report)
    f = _quality(report)
    assert f.severity == ("info" if passes else "error")
    # Independent reference: relative error of the projected gradient is exactly err.
    torch.testing.assert_close(f.details["relative_error"], fn.err, rtol=1e-4, atol=1e-7)
    assert f.details["max_relative_error"] == 1e-2 and f.details["min_cosine"] == 0.99
    if not passes:
        assert "relative error 0.21 > 0.01" in f.message and "max_relative_error" in f.hint


def test_approximate_thresholds_are_configurable():
    loose = gradsmith.check(SinOff21, _r(6), approximate=True, max_relative_error=0.25)
    assert loose.passed, str(loose)
    strict = gradsmith.check(SinOffHalfPercent, _r(6), approximate=True, max_relative_error=1e-3)
    assert not strict.passed
    # A cosine threshold: the 21% scale error keeps the direction (cosine 1).
    assert _quality(loose).details["cosine"] == pytest.approx(1.0)


@pytest.mark.parametrize("kwargs, match", [
    ({"approximate": True, "max_relative_error": -1}, r"max_relative_error must be a number in "
                                                       r"\[0, inf\], got -1"),
    ({"approximate": True, "min_cosine": 2}, r"min_cosine must be a number in \[-1, 1\], got 2"),
    ({"min_cosine": 0.9}, r"min_cosine=0.9 only applies with approximate=True"),
])
def test_bad_approximate_thresholds_name_the_option(kwargs, match):
    with pytest.raises(gradsmith.GradsmithError, match=match):
        gradsmith.check(SinOff21, _r(3), **kwargs)


@pytest.mark.parametrize("case", [c for c in __import__("corpus").all_cases()
                                  if c.name.startswith(("two-outputs", "split-"))],
                         ids=lambda c: c.name)
def test_unused_outputs_agree_with_gradcheck_check_undefined_grad(case):
    # Reference: gradcheck builds each output's Jacobian from a backward with only that
    # output, so the others are undefined, and check_undefined_grad=True adds all-undefined.
    args = [a.requires_grad_() for a in case.make_args()]
    try:
        reference = torch.autograd.gradcheck(case.fn.apply, args, check_undefined_grad=True)
    except (RuntimeError, TypeError):  # GradcheckError is a RuntimeError
        reference = False
    report = gradsmith.check(case.fn, *case.make_args())
    assert report.passed == reference == case.passes, str(report)
