"""Zero-configuration inputs follow the contract the code is written for (issues 18 and 21).

Reduced cases, written here: a hyperparameter forward stores on ctx (or passes to ``float()``)
made a trainable tensor gave a false ``tensor-on-ctx``; a per-feature bias or weight made the
input's full shape turned a correct bias-add into ``grad-shape-mismatch`` and a
mean-instead-of-sum bug into a shape error instead of a gradient-mismatch.
"""

import torch
from torch.autograd import Function
from torch.autograd.function import once_differentiable

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


class LayerNorm(Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps=1e-5):
        mu = x.mean(-1, keepdim=True)
        rstd = 1 / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + eps)
        xhat = (x - mu) * rstd
        ctx.save_for_backward(xhat, weight, rstd)
        return xhat * weight + bias

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        xhat, weight, rstd = ctx.saved_tensors
        n = xhat.shape[-1]
        gx = g * weight
        dx = rstd * (gx - gx.mean(-1, keepdim=True) - xhat * (gx * xhat).mean(-1, keepdim=True))
        return dx, (g * xhat).reshape(-1, n).sum(0), g.reshape(-1, n).sum(0), None


class WeightedMSE(Function):
    """A per-feature weight of the squared error, reduced to one value."""

    @staticmethod
    def forward(ctx, pred, target, weight):
        ctx.save_for_backward(pred, target, weight)
        return (weight * (pred - target) ** 2).mean()

    @staticmethod
    def backward(ctx, g):
        pred, target, weight = ctx.saved_tensors
        d, n = pred - target, pred.numel()
        return g * 2 * weight * d / n, -g * 2 * weight * d / n, (g * d * d / n).sum(0)


def test_a_layer_norm_gets_per_feature_weight_and_bias_and_matches_torch():
    found = _found(LayerNorm)
    x, weight, bias, eps = found.args
    assert weight.shape == bias.shape == (x.shape[-1],), found.description
    for args in _every_set(LayerNorm, found):
        report = gradsmith.check(LayerNorm, *args, compat=False)
        assert report.passed, report.codes("error")
    # Independent reference: torch's own layer_norm and its autograd.
    leaves = [t.detach().clone().requires_grad_() for t in (x, weight, bias)]
    g = torch.randn(x.shape, dtype=x.dtype)
    ref = torch.nn.functional.layer_norm(leaves[0], (x.shape[-1],), leaves[1], leaves[2], eps)
    got = LayerNorm.apply(*leaves, eps)
    torch.testing.assert_close(got, ref)
    for r, o in zip(torch.autograd.grad(ref, leaves, g), torch.autograd.grad(got, leaves, g)):
        torch.testing.assert_close(o, r)


def test_a_weighted_mse_with_a_per_feature_weight_passes():
    found = _found(WeightedMSE)
    pred, target, weight = found.args
    assert weight.shape == (pred.shape[-1],) and target.shape == pred.shape
    report = gradsmith.check(WeightedMSE, *found.args, compat=False)
    assert report.passed, report.codes("error")
    # Independent reference: autograd of the same expression.
    leaves = [t.detach().clone().requires_grad_() for t in (pred, target, weight)]
    ref = torch.autograd.grad((leaves[2] * (leaves[0] - leaves[1]) ** 2).mean(), leaves)
    got = torch.autograd.grad(WeightedMSE.apply(*leaves), leaves)
    for r, o in zip(ref, got):
        torch.testing.assert_close(o, r)


class ChannelBias(Function):
    """A per-channel bias of a (batch, channels, length) input."""

    @staticmethod
    def forward(ctx, x, bias):
        return x + bias.view(1, -1, 1)

    @staticmethod
    def backward(ctx, g):
        return g, g.sum((0, 2))


def test_a_per_channel_bias_gets_the_channel_layout():
    found = _found(ChannelBias)
    x, bias = found.args
    assert x.dim() == 3 and bias.shape == (x.shape[1],), found.description
    report = gradsmith.check(ChannelBias, *found.args, compat=False)
    assert report.passed, report.codes("error")
    assert "broadcast-grad" not in report.codes("warning")
    # Independent reference: autograd of the same broadcast add.
    xx, bb = x.detach().clone().requires_grad_(), bias.detach().clone().requires_grad_()
    g = torch.randn(x.shape, dtype=x.dtype)
    ref = torch.autograd.grad(xx + bb[None, :, None], (xx, bb), g)
    got = torch.autograd.grad(ChannelBias.apply(xx, bb), (xx, bb), g)
    for r, o in zip(ref, got):
        torch.testing.assert_close(o, r)


class Window(Function):
    """Bounds stored on ctx as a tuple, no annotations, names no table knows."""

    @staticmethod
    def forward(ctx, x, left, right):
        ctx.save_for_backward(x)
        ctx.edges = (left, right)
        return x.clamp(left, right)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        left, right = ctx.edges
        return g * ((x >= left) & (x <= right)).to(g.dtype), None, None


def test_hyperparameters_stored_on_ctx_as_a_tuple_are_python_floats():
    found = _found(Window)
    x, left, right = found.args
    assert isinstance(left, float) and isinstance(right, float), found.description
    report = gradsmith.check(Window, *found.args, compat=False)
    assert report.passed, report.codes("error")
    assert "tensor-on-ctx" not in report.codes("warning")
    # Independent reference: torch.clamp's own gradient.
    xx = x.detach().clone().requires_grad_()
    (ref,) = torch.autograd.grad(torch.clamp(xx, left, right).sum(), xx)
    (got,) = torch.autograd.grad(Window.apply(xx, left, right).sum(), xx)
    torch.testing.assert_close(got, ref)
