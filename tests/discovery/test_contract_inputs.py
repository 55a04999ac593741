"""Zero-configuration inputs follow the contract the code is written for (issues 18 and 21).

Reduced cases, written here: a hyperparameter forward stores on ctx (or passes to ``float()``)
made a trainable tensor gave a false ``tensor-on-ctx``; a per-feature bias or weight made the
input's full shape turned a correct bias-add into ``grad-shape-mismatch`` and a
mean-instead-of-sum bug into a shape error instead of a gradient-mismatch.
"""

import torch
from torch.autograd import Function

import gradsmith
from gradsmith.discovery.synthesize import Synthesized, synthesize


class Scaled(Function):
    @staticmethod
    def forward(ctx, x, coef):
        ctx.coef = coef
        return x * coef

    @staticmethod
    def backward(ctx, g):
        return g * ctx.coef, None


class Shift(Function):
    @staticmethod
    def forward(ctx, x, bias_init):
        ctx.shift = float(bias_init)
        return x + ctx.shift

    @staticmethod
    def backward(ctx, g):
        return g, None


class BiasAdd(Function):
    @staticmethod
    def forward(ctx, x, bias):
        return x + bias

    @staticmethod
    def backward(ctx, g):
        return g, g.sum(0)


class BiasAddMean(Function):
    """The bug: the bias gradient is averaged over the rows instead of summed."""

    @staticmethod
    def forward(ctx, x, bias):
        return x + bias

    @staticmethod
    def backward(ctx, g):
        return g, g.mean(0)


class FeatureScale(Function):
    @staticmethod
    def forward(ctx, x, weight):
        ctx.save_for_backward(x, weight)
        return x * weight.unsqueeze(0)

    @staticmethod
    def backward(ctx, g):
        x, weight = ctx.saved_tensors
        grad_weight = (g * x).view(-1, x.shape[-1]).sum(0)
        return g * weight, grad_weight


def _found(fn) -> Synthesized:
    found = synthesize(fn)
    assert isinstance(found, Synthesized), found
    return found


def _every_set(fn, found: Synthesized):
    yield found.args
    for variant in found.variants:
        yield variant.args


def test_a_hyperparameter_stored_on_ctx_is_a_python_float():
    found = _found(Scaled)
    x, coef = found.args
    assert isinstance(coef, float) and not isinstance(coef, torch.Tensor)
    assert isinstance(x, torch.Tensor) and x.requires_grad
    for args in _every_set(Scaled, found):
        report = gradsmith.check(Scaled, *args, compat=False)
        assert report.passed, report.codes("error")
        assert "tensor-on-ctx" not in report.codes("warning")
    # Independent reference: autograd of x * coef.
    xx = x.detach().clone().requires_grad_()
    (xx * coef).sum().backward()
    torch.testing.assert_close(xx.grad, torch.full_like(xx, coef))


def test_an_argument_passed_to_float_is_a_python_float():
    found = _found(Shift)
    assert isinstance(found.args[1], float), found.description
    assert "bias_init=0.5" in found.description
    report = gradsmith.check(Shift, *found.args, compat=False)
    assert report.passed, report.codes("error")


def test_a_bias_whose_gradient_backward_sums_is_one_dimensional_and_passes():
    found = _found(BiasAdd)
    x, bias = found.args
    assert bias.shape == (x.shape[-1],) and bias.requires_grad
    assert "per-feature" in found.description
    for args in _every_set(BiasAdd, found):
        report = gradsmith.check(BiasAdd, *args, compat=False)
        assert report.passed, report.codes("error")
    # Independent reference: autograd of x + bias on the same inputs.
    xx, bb = x.detach().clone().requires_grad_(), bias.detach().clone().requires_grad_()
    g = torch.randn(x.shape, dtype=x.dtype)
    ref = torch.autograd.grad(xx + bb, (xx, bb), g)
    got = torch.autograd.grad(BiasAdd.apply(xx, bb), (xx, bb), g)
    for r, o in zip(ref, got):
        torch.testing.assert_close(o, r)


def test_a_mean_instead_of_sum_bias_gradient_is_a_gradient_mismatch_not_a_shape_error():
    found = _found(BiasAddMean)
    x, bias = found.args
    assert bias.shape == (x.shape[-1],)
    # Independent reference: the true bias gradient is the column sum, not the mean.
    g = torch.ones(x.shape, dtype=x.dtype)
    (got,) = torch.autograd.grad(BiasAddMean.apply(x, bias), bias, g)
    assert not torch.allclose(got, g.sum(0))
    report = gradsmith.check(BiasAddMean, *found.args, compat=False)
    assert not report.passed
    assert "gradient-mismatch" in report.codes("error")
    assert "grad-shape-mismatch" not in report.codes("error")


def test_a_per_feature_scale_forward_broadcasts_passes():
    found = _found(FeatureScale)
    x, weight = found.args
    assert weight.shape == (x.shape[-1],), found.description
    for args in _every_set(FeatureScale, found):
        report = gradsmith.check(FeatureScale, *args, compat=False)
        assert report.passed, report.codes("error")
    # Independent reference: autograd of x * weight.
    xx, ww = x.detach().clone().requires_grad_(), weight.detach().clone().requires_grad_()
    g = torch.randn(x.shape, dtype=x.dtype)
    ref = torch.autograd.grad(xx * ww, (xx, ww), g)
    got = torch.autograd.grad(FeatureScale.apply(xx, ww), (xx, ww), g)
    for r, o in zip(ref, got):
        torch.testing.assert_close(o, r)
