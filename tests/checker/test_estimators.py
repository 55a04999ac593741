"""Undeclared estimators are recognised, named and guided to a declaration that is verified;
declared ones are judged against their declaration (first and second order); plain bugs
are never mistaken for estimators."""

import re

import pytest
import torch
from corpus import bugs_gradients, estimators

import gradsmith


def _r(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _numerical_vjp(fn, args, v, h=1e-6):
    """Independent reference: central differences of the forward, element by element."""
    x = args[0]
    out = torch.zeros(x.numel(), dtype=torch.float64)
    for j in range(x.numel()):
        d = torch.zeros(x.numel(), dtype=torch.float64)
        d[j] = h
        plus = fn.apply(x + d.reshape(x.shape), *args[1:])
        minus = fn.apply(x - d.reshape(x.shape), *args[1:])
        out[j] = (v * (plus - minus)).sum() / (2 * h)
    return out.reshape(x.shape)


def _backward_vjp(fn, args, v):
    x = args[0].clone().requires_grad_(True)
    (g,) = torch.autograd.grad(fn.apply(x, *args[1:]), x, v)
    return g


UNDECLARED = [
    # (Function, inputs, kind, the suggested declaration)
    (estimators.RoundSTE, lambda: (_r(6) * 3,), "straight-through", "surrogate=lambda x: x"),
    (estimators.SignHardtanhSTE, lambda: (_r(8) * 2,), "straight-through",
     "surrogate=lambda x: x.clamp(-1, 1)"),
    (estimators.ClampSTE, lambda: (_r(8) * 2, -1.0, 1.0), "straight-through-saturating",
     "surrogate=lambda x, lo, hi: x"),
    (estimators.FakeQuantSTE, lambda: (_r(6), 0.1, 8), "straight-through",
     "surrogate=lambda x, scale, bits: x"),
    (estimators.GradReverse, lambda: (_r(5), 0.5), "scaled",
     "intended=lambda x, alpha, grad: (-alpha * grad, None)"),
    (estimators.GradReverseTensorAlpha, lambda: (_r(5), torch.tensor(0.3, dtype=torch.float64)),
     "scaled", "intended=lambda x, alpha, grad: (-alpha * grad, None)"),
    (estimators.GradReverseTensorAlpha, lambda: (_r(5), _r(5, seed=3).abs()),
     "scaled", "intended=lambda x, alpha, grad: (-alpha * grad, None)"),
    (estimators.GradScale, lambda: (_r(2, 3), 3.0), "scaled",
     "intended=lambda x, scale, grad: (scale * grad, None)"),
]


@pytest.mark.parametrize("fn, args, kind, declaration", UNDECLARED,
                         ids=[f"{u[0].__name__}-{i}" for i, u in enumerate(UNDECLARED)])
def test_undeclared_estimator_is_named_and_guided_to_a_verified_declaration(
        fn, args, kind, declaration):
    v = _r(*args()[0].shape, seed=9)
    numerical = _numerical_vjp(fn, args(), v)
    analytic = _backward_vjp(fn, args(), v)
    # The signature, by the independent reference: numerical exactly 0 where backward is not,
    # or a constant ratio between them.
    if kind.startswith("straight-through"):
        wrong = (analytic - numerical).abs() > 1e-6
        assert wrong.any() and (numerical[wrong] == 0).all()
    else:
        ratio = analytic / numerical
        factor = args()[1]
        if isinstance(factor, torch.Tensor) and factor.dim() > 0:  # element by element
            torch.testing.assert_close(ratio, -factor)
        else:
            torch.testing.assert_close(ratio, torch.full_like(ratio, float(ratio.flatten()[0])))
    report = gradsmith.check(fn, *args())
    assert not report.passed and report.codes("error") == {"undeclared-estimator"}, str(report)
    (f,) = report.errors
    assert set(f.details["estimator"].values()) == {kind}
    assert f.details["verified"] and declaration in f.details["declaration"]
    assert f.details["declaration"] in f.hint and "must be declared" in f.message
    # The suggested line works: the Function passes with it.
    key, source = re.search(r"(surrogate|intended)=(lambda .*)\)$",
                            f.details["declaration"]).groups()
    declared = eval(source, {"torch": torch})  # noqa: S307 - gradsmith's own suggestion
    assert gradsmith.check(fn, *args(), **{key: declared}).passed


def test_reversal_factor_is_named_after_the_forward_argument_and_measured():
    report = gradsmith.check(estimators.GradReverse, _r(5), 0.25)
    (f,) = report.errors
    assert f.details["scale"] == {"x": pytest.approx(-0.25)}
    assert "gradient reversal with coefficient 0.25" in f.message


def test_suggested_example_line_uses_the_real_signature_and_inputs():
    report = gradsmith.check(estimators.FakeQuantSTE, _r(2, 3), 0.1, 8)
    line = report.errors[0].details["declaration"]
    assert line.startswith("@gradsmith.example(lambda: (torch.randn(2, 3, "
                           "dtype=torch.float64), 0.1, 8), surrogate=lambda x, scale, bits:")


@pytest.mark.parametrize("fn, args", [
    (bugs_gradients.ExpDoubled, lambda: (_r(4),)),  # a constant factor, non-identity forward
    (bugs_gradients.MatmulTransposed, lambda: (_r(4, 4), _r(4, 4, seed=1))),
])
def test_plain_bugs_are_not_called_estimators(fn, args):
    report = gradsmith.check(fn, *args())
    assert report.codes("error") == {"gradient-mismatch"}, str(report)


def test_one_percent_everywhere_is_a_gradient_mismatch_not_a_scaling():
    class OnePercent(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            return 1.01 * g

    # Identity forward, constant factor: the signature of gradient scaling by 1.01, which is
    # what it is; the user is told how to declare it or remove the factor.
    (f,) = gradsmith.check(OnePercent, _r(5)).errors
    assert f.code == "undeclared-estimator" and "gradient scaling by 1.01" in f.message
    assert "remove the factor" in f.hint


def test_template_when_no_candidate_reproduces_backward():
    class LSQLike(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, s):
            ctx.save_for_backward(x, s)
            return (x / s).round().clamp(-8, 7) * s

        @staticmethod
        def backward(ctx, g):
            x, s = ctx.saved_tensors
            v = x / s
            mid = ((v >= -8) & (v <= 7)).to(g.dtype)
            return g * mid, (g * mid * (v.round() - v)).sum().reshape(s.shape)

    report = gradsmith.check(LSQLike, _r(6), torch.tensor(0.2, dtype=torch.float64))
    (est,) = [f for f in report.errors if f.code == "undeclared-estimator"]
    assert not est.details["verified"]
    assert "surrogate=lambda x, s: ...)" in est.details["declaration"]
    assert ".detach()" in est.hint and "s disagrees too" in est.message


def _double_backward(fn, x, v, w):
    x = x.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(fn(x), x, v, create_graph=True)
    if not g.requires_grad:  # backward's result carries no graph back to x
        return torch.zeros_like(x)
    (gg,) = torch.autograd.grad(g, x, w)
    return gg


def test_second_order_is_judged_against_the_surrogate():
    x, v, w = _r(6), _r(6, seed=1), _r(6, seed=2)
    reference = _double_backward(torch.tanh, x, v, w)  # the surrogate's second derivative
    good = _double_backward(estimators.SoftSignSTE.apply, x, v, w)
    bad = _double_backward(estimators.SoftSignSTESavedDerivative.apply, x, v, w)
    torch.testing.assert_close(good, reference)
    assert not torch.allclose(bad, reference) and not bool(bad.any())
    assert gradsmith.check(estimators.SoftSignSTE, x, surrogate=torch.tanh).passed
    # bad's derivative is exactly 0 (saved tanh'): a missing second derivative, a warning
    report = gradsmith.check(estimators.SoftSignSTESavedDerivative, x, surrogate=torch.tanh)
    assert report.passed, str(report)
    (f,) = [f for f in report.findings if f.code == "double-backward-unsupported"]
    assert f.details["inputs"] == ["x"] and "surrogate's second derivative" in f.message


def test_second_order_incomplete_with_the_reason_when_the_surrogate_cannot_be_evaluated():
    calls = []

    def works_twice(x):  # enough for the first-order comparison (two directions), no more
        calls.append(1)
        if len(calls) > 2:
            raise ValueError("surrogate unavailable")
        return x.clamp(-1, 1)

    report = gradsmith.check(estimators.SignHardtanhSTE, _r(8) * 2, surrogate=works_twice,
                             checks=["surrogate", "second_order"])
    # second order applies and was not established: never a plain PASS
    assert not report.errors and report.verdict == "INCOMPLETE", str(report)
    assert report.checks == ["surrogate"]
    (finding,) = report.incomplete
    reason = finding.details["reason"]
    assert finding.check == "second_order"
    assert "surrogate unavailable" in reason and "not the real forward" in reason


def test_declared_noise_is_compared_draw_for_draw():
    def intended(x, sigma, grad):
        return grad + sigma * torch.randn_like(grad), None

    report = gradsmith.check(estimators.NoisyGrad, _r(6), 0.1, intended=intended)
    assert report.passed, str(report)
    assert "random-backward" in report.codes("info")
    assert "second_order" in report.checks  # against the declaration: no noise echo
    undeclared = gradsmith.check(estimators.NoisyGrad, _r(6), 0.1)
    assert not undeclared.passed


def test_example_decorator_carries_intended_and_rejects_both():
    @gradsmith.example(lambda: (_r(5), 0.5), intended=lambda x, a, grad: (-a * grad, None))
    class Reverse(estimators.GradReverse):
        pass

    (ex,) = gradsmith.examples_of(Reverse)
    assert ex.intended is not None and gradsmith.check(Reverse).passed
    with pytest.raises(gradsmith.GradsmithError, match="both surrogate= and intended="):
        gradsmith.example(lambda: (_r(2),), surrogate=lambda x: x, intended=lambda x, g: g)
    with pytest.raises(gradsmith.GradsmithError, match="both surrogate= and intended="):
        gradsmith.check(Reverse, _r(2), 0.5, surrogate=lambda x, a: x,
                        intended=lambda x, a, g: (g, None))
    with pytest.raises(gradsmith.GradsmithError, match="intended must be a callable, got int"):
        gradsmith.check(Reverse, _r(2), 0.5, intended=3)
