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
    (f,) = [f for f in detached.findings if f.code == "double-backward-mismatch"]
    assert "`.detach()`" in f.hint
    saved = gradsmith.check(SigmoidSavedIntermediate, x)
    (f,) = [f for f in saved.findings if f.code == "double-backward-mismatch"]
    assert ".detach" not in f.hint and "saved as intermediates" in f.hint
    assert "once_differentiable" in f.hint
