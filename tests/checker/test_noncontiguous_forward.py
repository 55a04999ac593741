"""A forward that raises on a non-contiguous input is a warning naming the input; a backward
that raises or any changed result stays an error (issue 18: se3cnn's ``features.view`` in
forward was a false alarm, an error on a correct Function)."""

import pytest
import torch
from torch.autograd import Function

import gradsmith


def _r(*shape, seed=0):
    return torch.randn(*shape, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))


class RowsViewedInForward(Function):
    """out = features.view(-1, d) @ w: correct; forward raises on a transposed features."""

    @staticmethod
    def forward(ctx, features, w):
        flat = features.view(-1, features.shape[-1])
        ctx.save_for_backward(flat, w)
        ctx.shape = features.shape
        return flat @ w

    @staticmethod
    def backward(ctx, g):
        flat, w = ctx.saved_tensors
        return (g @ w.T).reshape(ctx.shape), flat.T @ g


class RowsViewedWrongWeightGrad(RowsViewedInForward):
    """The same forward, with a planted wrong weight gradient (the transpose missing a factor)."""

    @staticmethod
    def backward(ctx, g):
        flat, w = ctx.saved_tensors
        return (g @ w.T).reshape(ctx.shape), 2 * flat.T @ g


class ViewedInBackward(Function):
    """Forward is layout-safe; backward views the saved input: raises on a transposed one."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return (x * x).sum(-1)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        flat = x.view(-1)  # raises when x is non-contiguous
        return (2 * flat.view(x.shape)) * g.unsqueeze(-1)


class ViewsOneReadsStridesOfOther(Function):
    """forward views ``a`` (raises on a transposed one) and reads ``b`` as if contiguous
    (``as_strided``): a changed result for ``b``, silently."""

    @staticmethod
    def forward(ctx, a, b):
        flat = torch.as_strided(b, (b.numel(),), (1,)).reshape(b.shape)
        return a.view(-1).sum() + flat * 2

    @staticmethod
    def backward(ctx, g):
        return torch.ones_like(g) * g.sum(), 2 * g


def _findings(report, code):
    return [f for f in report.findings if f.code == code]


def test_forward_raising_on_a_noncontiguous_input_is_a_warning_naming_it():
    report = gradsmith.check(RowsViewedInForward, _r(2, 3, 4), _r(4, 2, seed=1))
    assert report.passed, report.codes("error")
    found = _findings(report, "noncontiguous-mismatch")
    assert [f.severity for f in found] == ["warning"]
    assert found[0].input == "features"
    assert "forward raises" in found[0].message
    assert "features.contiguous()" in found[0].hint
    # the gradients that were checked are right: autograd of the same expression agrees
    f, w = _r(2, 3, 4).requires_grad_(), _r(4, 2, seed=1).requires_grad_()
    g = _r(6, 2, seed=2)
    torch.testing.assert_close(
        torch.autograd.grad(RowsViewedInForward.apply(f, w), (f, w), g),
        torch.autograd.grad(f.reshape(-1, 4) @ w, (f, w), g))


def test_a_wrong_gradient_still_fails_beside_the_warning():
    report = gradsmith.check(RowsViewedWrongWeightGrad, _r(2, 3, 4), _r(4, 2, seed=1))
    assert not report.passed
    assert "gradient-mismatch" in report.codes("error")


def test_backward_raising_on_a_noncontiguous_input_stays_an_error():
    report = gradsmith.check(ViewedInBackward, _r(3, 4))
    assert not report.passed
    errors = [f for f in _findings(report, "noncontiguous-mismatch") if f.is_error]
    assert errors and errors[0].input == "x"
    assert "forward raises" not in errors[0].message


@pytest.mark.parametrize("fn", [ViewsOneReadsStridesOfOther])
def test_the_input_whose_results_change_is_an_error_beside_the_warning(fn):
    report = gradsmith.check(fn, _r(3, 4), _r(3, 4, seed=1))
    found = {f.input: f.severity for f in _findings(report, "noncontiguous-mismatch")}
    assert found == {"a": "warning", "b": "error"}
    assert not report.passed
