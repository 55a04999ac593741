"""Second order after verified first order (issue 18): a backward whose dependence on an
input autograd does not see, wholly (its derivative exactly 0 where finite differences of
backward are not: "zero") or in part (non-zero and different: "partial"), is one
``double-backward-unsupported`` warning per Function and PASSes; it fails where second order
is required. The independent reference is torch's own gradgradcheck and autograd of the
equivalent plain expression."""

import pytest
import torch
from torch.autograd import Function
from torch.autograd.function import once_differentiable

import gradsmith
from gradsmith.checker.codes import ROWS


def _r(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed),
                       dtype=torch.float64, requires_grad=True)


class NoGradCube(Function):
    """x**3 with 3x^2 computed in forward under no_grad and saved: first order right,
    backward treats it as a constant."""

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


class OnceCube(NoGradCube):
    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        (d,) = ctx.saved_tensors
        return g * d


class Cube(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * g * x * x


class HalfDetachedCube(Function):
    """3 g x x.detach(): first order right; its derivative 3 g x is non-zero and half the
    true 6 g x: autograd sees only part of backward's dependence on x."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * g * x * x.detach()


class PartlyDetachedCube(Function):
    """Even elements' derivative cut (0), odd ones half of the truth: partial as a whole."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        even = torch.arange(x.numel()).reshape(x.shape) % 2 == 0
        return 3 * g * torch.where(even, x.detach() * x.detach(), x * x.detach())


class DetachedMul(Function):
    """x * w saving detached copies: backward is right and differentiable with respect to
    neither input."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x.detach(), w.detach())
        return x * w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * w, g * x


class WrongFirstCube(Function):
    """2 g x for x**3, through autograd-visible ops: a wrong first order."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * g * x


def _second(fn, x):
    """The Function's own double backward d/dx <grad, 1> along ones, by autograd."""
    (g,) = torch.autograd.grad(fn.apply(x).sum(), x, create_graph=True)
    if not g.requires_grad:
        return torch.zeros_like(x)
    (gg,) = torch.autograd.grad(g.sum(), x, allow_unused=True)
    return torch.zeros_like(x) if gg is None else gg


def _unsupported(report):
    return [f for f in report.findings if f.code == "double-backward-unsupported"]


def test_backward_on_forward_saved_values_is_one_warning_and_passes():
    x = _r(5)
    assert torch.autograd.gradcheck(NoGradCube.apply, (x,))  # first order right
    assert not torch.autograd.gradgradcheck(NoGradCube.apply, (x,), raise_exception=False)
    # missing, not wrong: its double backward is exactly 0, the truth (x**3's) is 6x
    assert torch.equal(_second(NoGradCube, x), torch.zeros_like(x))
    (g,) = torch.autograd.grad((x ** 3).sum(), x, create_graph=True)
    truth = torch.autograd.grad(g.sum(), x)[0]
    assert bool((truth.abs() > 1e-3).all())
    report = gradsmith.check(NoGradCube, x)
    assert report.passed and report.verdict == "PASSED", str(report)
    assert not report.codes("error")
    (f,) = _unsupported(report)
    assert f.severity == "warning" and f.check == "second_order"
    assert f.details["inputs"] == ["x"]
    assert f.message.startswith("first order verified; backward is not differentiable "
                                "with respect to x")
    assert "silently returns 0" in f.message
    assert "@once_differentiable" in f.hint and "--require second-order" in f.hint
    # Only the missing derivative gets it: @once_differentiable (double backward raises by
    # contract) and a differentiable backward (gradgradcheck holds) get no second-order finding.
    once = gradsmith.check(OnceCube, x)
    assert once.passed and not _unsupported(once), str(once)
    assert "@once_differentiable" in once.skipped["second_order"]
    assert torch.autograd.gradgradcheck(Cube.apply, (x,))
    good = gradsmith.check(Cube, x)
    assert good.passed and "second_order" in good.checks, str(good)
    assert not {f.code for f in good.findings if f.check == "second_order"}


def test_two_inputs_without_graph_are_one_finding_naming_both():
    x, w = _r(3, 4), _r(3, 4, seed=1)
    assert torch.autograd.gradcheck(DetachedMul.apply, (x, w))
    assert not torch.autograd.gradgradcheck(DetachedMul.apply, (x, w), raise_exception=False)
    # the truth: d^2 (x * w) / dx dw = 1 per element; the Function's double backward: none
    (gx, gw) = torch.autograd.grad(DetachedMul.apply(x, w).sum(), (x, w), create_graph=True)
    assert not gx.requires_grad and not gw.requires_grad
    report = gradsmith.check(DetachedMul, x, w)
    assert report.passed, str(report)
    assert "double-backward-mismatch" not in report.codes()
    (f,) = _unsupported(report)
    assert f.details["inputs"] == ["x", "w"] and "respect to x, w" in f.message


@pytest.mark.parametrize("fn", [HalfDetachedCube, PartlyDetachedCube])
def test_a_partial_second_derivative_is_the_same_warning(fn):
    x = _r(6)
    assert torch.autograd.gradcheck(fn.apply, (x,))
    assert not torch.autograd.gradgradcheck(fn.apply, (x,), raise_exception=False)
    ours = _second(fn, x)
    assert bool(ours.any())  # autograd's second derivative is non-zero somewhere ...
    assert not torch.allclose(ours, 6 * x.detach())  # ... and not x**3's 6x
    report = gradsmith.check(fn, x)
    assert report.passed and not report.codes("error"), str(report)
    assert "double-backward-mismatch" not in report.codes()
    (f,) = _unsupported(report)
    assert f.severity == "warning"
    assert f.details["partial"] == ["x"] and f.details["zero"] == []
    assert f.details["inputs"] == ["x"]
    assert "only part of the second derivative for x" in f.message
    assert "treats as constants" in f.message and "silently returns 0" not in f.message
    # and a wrong first order (2 g x for x**3) still fails as such
    assert not torch.autograd.gradcheck(WrongFirstCube.apply, (x,), raise_exception=False)
    wrong = gradsmith.check(WrongFirstCube, x)
    assert wrong.codes("error") == {"gradient-mismatch"}, str(wrong)


class MixedCube(Function):
    """x**3 * w saving w detached: backward's dependence on x is seen in part
    (3 g w x x.detach()), on w not at all."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w.detach())
        return x ** 3 * w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return 3 * g * w * x * x.detach(), g * x.detach() ** 3


def test_zero_and_partial_inputs_are_named_in_one_warning():
    x, w = _r(4), _r(4, seed=1)
    assert torch.autograd.gradcheck(MixedCube.apply, (x, w))
    assert not torch.autograd.gradgradcheck(MixedCube.apply, (x, w), raise_exception=False)
    report = gradsmith.check(MixedCube, x, w)
    assert report.passed, str(report)
    (f,) = _unsupported(report)
    assert f.details["zero"] == ["w"] and f.details["partial"] == ["x"]
    assert sorted(f.details["inputs"]) == ["w", "x"]
    assert "silently returns 0 for it" in f.message and "respect to w" in f.message
    assert "only part of the second derivative for x" in f.message


class SavedSigmoidSwish(Function):
    """swish x * sigmoid(x) saving sigmoid(x) computed in forward: the common correct
    pattern; its backward g (s + x s (1 - s)) sees x but not s's dependence on x."""

    @staticmethod
    def forward(ctx, x):
        s = torch.sigmoid(x)
        ctx.save_for_backward(x, s)
        return x * s

    @staticmethod
    def backward(ctx, g):
        x, s = ctx.saved_tensors
        return g * (s + x * s * (1 - s))


class WrongFirstSwish(SavedSigmoidSwish):
    """A planted wrong first order: the x s (1 - s) term dropped."""

    @staticmethod
    def backward(ctx, g):
        _, s = ctx.saved_tensors
        return g * s


def test_swish_saving_sigmoid_passes_with_x_partial():
    x = _r(7)
    assert torch.autograd.gradcheck(SavedSigmoidSwish.apply, (x,))
    assert not torch.autograd.gradgradcheck(SavedSigmoidSwish.apply, (x,),
                                            raise_exception=False)
    # the true second derivative, by autograd of the plain expression and by hand ...
    (g,) = torch.autograd.grad((x * torch.sigmoid(x)).sum(), x, create_graph=True)
    truth = torch.autograd.grad(g.sum(), x)[0]
    s = torch.sigmoid(x.detach())
    torch.testing.assert_close(truth, s * (1 - s) * (2 + x.detach() * (1 - 2 * s)))
    # ... against the Function's: non-zero (x is seen) and different (s is not)
    ours = _second(SavedSigmoidSwish, x)
    torch.testing.assert_close(ours, s * (1 - s))
    assert not torch.allclose(ours, truth)
    report = gradsmith.check(SavedSigmoidSwish, x)
    assert report.passed and report.verdict == "PASSED", str(report)
    (f,) = _unsupported(report)
    assert f.details["partial"] == ["x"] and f.details["zero"] == []
    assert "only part of the second derivative for x" in f.message
    wrong = gradsmith.check(WrongFirstSwish, x)
    assert not wrong.passed and "gradient-mismatch" in wrong.codes("error"), str(wrong)


def test_the_code_is_a_documented_warning():
    row = ROWS["double-backward-unsupported"]
    assert row.severity == "warning" and row.check == "second_order"
    assert "second-order" in row.severity_note


def test_assert_gradients_fails_a_missing_second_derivative_only_when_required():
    from gradsmith._errors import GradsmithUsageError
    from gradsmith.testing import assert_gradients

    x = _r(5)
    assert_gradients(NoGradCube, x)  # a warning: passes
    with pytest.raises(AssertionError, match="second-order is required"):
        assert_gradients(NoGradCube, x, require="second-order")
    assert_gradients(Cube, x, require=["second-order"])  # differentiable: holds
    assert_gradients(OnceCube, x, require=["second-order"])  # raises by contract: holds
    assert_gradients(HalfDetachedCube, x)  # partial: the same warning, passes
    with pytest.raises(AssertionError, match="second-order is required"):
        assert_gradients(HalfDetachedCube, x, require=["second-order"])
    with pytest.raises(AssertionError, match="gradient-mismatch"):
        assert_gradients(WrongFirstCube, x, require=["second-order"])
    with pytest.raises(GradsmithUsageError, match="'second_order'.*second-order"):
        assert_gradients(Cube, x, require=["second_order"])


class SavedTanhSign(Function):
    """sign(x) with the tanh surrogate's gradient 1 - tanh(x)^2, one tanh saved from forward:
    first order agrees with the declaration, its second derivative only in part."""

    @staticmethod
    def forward(ctx, x):
        t = torch.tanh(x)
        ctx.save_for_backward(x, t)
        return torch.sign(x)

    @staticmethod
    def backward(ctx, g):
        x, t = ctx.saved_tensors
        return g * (1 - t * torch.tanh(x))


def test_a_declared_estimator_gets_the_same_fold():
    x = _r(6)
    report = gradsmith.check(SavedTanhSign, x, surrogate=torch.tanh)
    assert report.passed and not report.codes("error"), str(report)
    (f,) = _unsupported(report)
    assert f.details["partial"] == ["x"] and f.details["zero"] == []
    assert "surrogate's second derivative" in f.message
    # the reference: the Function's double backward -t (1 - t^2) is non-zero and half of the
    # surrogate's, tanh'' = -2 t (1 - t^2)
    t = torch.tanh(x.detach())
    torch.testing.assert_close(_second(SavedTanhSign, x), -t * (1 - t * t))
    (g,) = torch.autograd.grad(torch.tanh(x).sum(), x, create_graph=True)
    torch.testing.assert_close(torch.autograd.grad(g.sum(), x)[0], -2 * t * (1 - t * t))
