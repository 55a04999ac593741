"""Zero-config inputs from a forward's raising guards, float mode selectors and distance
functions (issue 18, held-out class "structured inputs": a covariance kernel with a single
lengthscale, a distance function it calls, a float ``nu`` selecting the formula). Reduced
cases, written here; before, every layout failed the guard and the Function got no inputs.
"""

import torch
from torch.autograd import Function
from torch.autograd.function import once_differentiable

import gradsmith
from gradsmith.discovery.callables import pairwise_distance, squared_distance
from gradsmith.discovery.guards import read_guards
from gradsmith.discovery.hints import Hint
from gradsmith.discovery.synthesize import Synthesized, synthesize


class GaussianKernel(Function):
    """exp(-|x1 - x2|^2 / (2 l^2)) with a lengthscale-only gradient, written for a squared
    distance function and a single lengthscale (the guard says so)."""

    @staticmethod
    def forward(ctx, x1, x2, lengthscale, sq_dist_func):
        if lengthscale.size(-1) > 1:
            raise ValueError("one lengthscale only")
        d = sq_dist_func(x1.div(lengthscale), x2.div(lengthscale))
        k = torch.exp(-d / 2)
        ctx.save_for_backward(d * k / lengthscale)
        return k

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        (dk,) = ctx.saved_tensors
        return None, None, g * dk, None


def _matern(x1, x2, lengthscale, nu, dist_func, wrong_15: bool):
    class Matern(Function):
        @staticmethod
        def forward(ctx, x1, x2, lengthscale, nu, dist_func):
            if lengthscale.size(-1) > 1:
                raise ValueError("one lengthscale only")
            r = dist_func(x1.div(lengthscale), x2.div(lengthscale))
            if nu == 0.5:
                k = torch.exp(-r)
                dk = r * k / lengthscale
            elif nu == 1.5:
                s = 3 ** 0.5 * r
                k = (1 + s) * torch.exp(-s)
                dk = s * s * torch.exp(-s) / lengthscale * (2 if wrong_15 else 1)
            ctx.save_for_backward(dk)
            return k

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            (dk,) = ctx.saved_tensors
            return None, None, g * dk, None, None

    return Matern


def _found(fn) -> Synthesized:
    found = synthesize(fn)
    assert isinstance(found, Synthesized), found
    return found


def _kernel_reference(x1, x2, lengthscale):
    return torch.exp(-torch.cdist(x1 / lengthscale, x2 / lengthscale) ** 2 / 2)


def test_a_guarded_single_lengthscale_and_a_distance_function_get_inputs_and_pass():
    found = _found(GaussianKernel)
    x1, x2, lengthscale, dist = found.args
    assert lengthscale.shape == (1, 1) and lengthscale.requires_grad
    assert not x1.requires_grad and not x2.requires_grad  # backward returns None for them
    assert dist is squared_distance
    assert "its name says a distance" in found.description
    g = torch.randn(x1.shape[0], x2.shape[0], dtype=torch.float64)
    (got,) = torch.autograd.grad(GaussianKernel.apply(*found.args), lengthscale, g)
    (reference,) = torch.autograd.grad(_kernel_reference(x1, x2, lengthscale), lengthscale, g)
    torch.testing.assert_close(got, reference)
    report = gradsmith.check(GaussianKernel, *found.args)
    assert report.passed, report
    for variant in found.variants:
        assert variant.args[2].shape[-1] == 1  # every variant keeps the guard's size 1


def test_a_float_mode_selector_is_tried_at_each_value_and_a_wrong_branch_is_caught():
    right = _matern(None, None, None, None, None, wrong_15=False)
    wrong = _matern(None, None, None, None, None, wrong_15=True)
    found = _found(wrong)
    x1, x2, lengthscale, nu, dist = found.args
    assert nu == 0.5 and dist is pairwise_distance
    (other,) = [v for v in found.variants if v.change == "nu=1.5"]
    assert other.args[3] == 1.5
    # the 1.5 branch's gradient, against autograd of the closed form: wrong by a factor 2
    l15 = other.args[2]
    s = 3 ** 0.5 * torch.cdist(x1 / l15, x2 / l15)
    g = torch.ones_like(s)
    (reference,) = torch.autograd.grad(((1 + s) * torch.exp(-s)), l15, g)
    (got,) = torch.autograd.grad(wrong.apply(*other.args), l15, g)
    torch.testing.assert_close(got, 2 * reference)
    assert gradsmith.check(wrong, *found.args).passed  # nu=0.5 is right
    assert "gradient-mismatch" in gradsmith.check(wrong, *other.args).codes("error")
    for args in (found.args, other.args):
        report = gradsmith.check(right, *args)
        assert report.passed, report


def test_guards_read_only_branch_tests_and_conditions_each_enough_to_raise():
    def forward(ctx, x, y, z, w, mode):
        assert z.shape[-1] == 1
        if x.size(0) != 1 and y.size(-1) > 1:  # both needed to raise: neither is required
            raise ValueError("either")
        if w.size(1) > 1 or w.size(0) > 1:  # each alone raises
            raise ValueError("w")
        return torch.where(x == 0.5, y, z) * w  # not a branch: x is no float selector

    hints = {n: Hint() for n in ("x", "y", "z", "w", "mode")}
    read_guards(forward, hints)
    assert hints["z"].unit_dims == {-1}
    assert hints["x"].unit_dims == set() and hints["y"].unit_dims == set()
    assert hints["w"].unit_dims == {0, 1}
    assert hints["x"].kind is None and hints["x"].literals == []


class InplaceTwoWayShift(Function):
    """Shift ``fold`` channels back and the next ``fold`` forward in time, (n, t, c, h, w);
    backward shifts ``grad_output`` itself in place (the defect: autograd may share it)."""

    @staticmethod
    def forward(ctx, x, fold):
        n, t, c, h, w = x.size()
        ctx.fold = fold
        out = x.clone()
        buffer = x.new_zeros(n, t, fold, h, w)
        buffer[:, :-1] = x[:, 1:, :fold]
        out[:, :, :fold] = buffer
        buffer = x.new_zeros(n, t, fold, h, w)
        buffer[:, 1:] = x[:, :-1, fold:2 * fold]
        out[:, :, fold:2 * fold] = buffer
        return out

    @staticmethod
    def backward(ctx, g):
        fold = ctx.fold
        n, t, c, h, w = g.size()
        buffer = g.new_zeros(n, t, fold, h, w)
        buffer[:, 1:] = g[:, :-1, :fold]
        g[:, :, :fold] = buffer
        buffer = g.new_zeros(n, t, fold, h, w)
        buffer[:, :-1] = g[:, 1:, fold:2 * fold]
        g[:, :, fold:2 * fold] = buffer
        return g, None


def test_a_slice_bound_int_gets_a_value_the_padded_layouts_fit_and_the_defect_is_caught():
    found = _found(InplaceTwoWayShift)  # before: every layout's channels (2) < 2 * fold (4)
    x, fold = found.args
    assert x.dim() == 5 and fold == 1 and x.shape[2] >= 2 * fold
    # the same y = shift(a) + b a user writes: b's gradient comes back shifted
    a, b = x.detach().clone().requires_grad_(), x.detach().clone().requires_grad_()
    g = torch.randn_like(x)
    (InplaceTwoWayShift.apply(a.clone(), fold) + b).backward(g)
    assert not torch.equal(b.grad, g)
    report = gradsmith.check(InplaceTwoWayShift, *found.args)
    assert "grad-output-mutated" in report.codes("error")


def _smoothed(wrong: bool):
    class SmoothedCrossEntropy(Function):
        """Label-smoothed cross entropy; ``lb_smooth`` and ``lb_ignore`` are numbers the code
        only does arithmetic with or compares labels to."""

        @staticmethod
        def forward(ctx, logits, label, lb_smooth, lb_ignore):
            classes = logits.size(1)
            keep = label.ne(lb_ignore).to(logits.dtype)
            target = torch.full_like(logits, lb_smooth / classes)
            target.scatter_(1, label.unsqueeze(1), 1. - lb_smooth + lb_smooth / classes)
            ctx.save_for_backward(logits, target, keep)
            return -(torch.log_softmax(logits, 1) * target).sum(1) * keep

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            logits, target, keep = ctx.saved_tensors
            scale = 1 if wrong else target.sum(1, keepdim=True)
            grad = torch.softmax(logits, 1) * scale - target * (2 if wrong else 1)
            return grad * (g * keep).unsqueeze(1), None, None, None

    return SmoothedCrossEntropy


def test_tensors_the_code_never_uses_as_tensors_become_numbers_as_a_last_resort():
    right, wrong = _smoothed(False), _smoothed(True)
    found = _found(right)  # before: every plan made lb_smooth, lb_ignore tensors and failed
    logits, label, lb_smooth, lb_ignore = found.args
    assert isinstance(lb_smooth, float) and isinstance(lb_ignore, float)
    assert label.dtype == torch.int64
    g = torch.randn(logits.shape[0], dtype=torch.float64)
    (got,) = torch.autograd.grad(right.apply(*found.args), logits, g)
    target = torch.full_like(logits, lb_smooth / logits.shape[1]).scatter(
        1, label.unsqueeze(1), 1. - lb_smooth + lb_smooth / logits.shape[1])
    reference_loss = -(torch.log_softmax(logits, 1) * target).sum(1)
    (reference,) = torch.autograd.grad(reference_loss, logits, g)
    torch.testing.assert_close(got, reference)
    assert gradsmith.check(right, *found.args).passed
    assert not gradsmith.check(wrong, *_found(wrong).args).passed
