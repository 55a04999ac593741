"""Tensors backward returns None for, tried in the layouts of a marginal of the main tensor.

Reduced from a Sinkhorn top-k (corpus 11a dev, WeirdSparsity ``TopKFunc1``): a weight ``w`` of
shape ``(1, n, 1)`` scales a ``(b, n, k)`` input; backward makes it an ``(n, n)`` diagonal. Synthesised
with the input's full shape, forward broadcast and backward raised a shape error, reported as a
``backward-error`` on a correct Function.
"""

from __future__ import annotations

import torch
from torch.autograd import Function

import gradsmith
from gradsmith.discovery.synthesize import Synthesized, _synthesize, synthesize


class RowWeighted(Function):
    """y = x * w, w a per-row (dimension 1) weight of shape (1, n, 1); no gradient for w."""

    @staticmethod
    def forward(ctx, x, w):
        b, n, k = x.shape
        ctx.save_for_backward(w)
        return x * w

    @staticmethod
    def backward(ctx, g):
        (w,) = ctx.saved_tensors
        return torch.diag_embed(w.view(-1)) @ g, None


class WrongRowWeighted(RowWeighted):
    """Planted: twice the gradient."""

    @staticmethod
    def backward(ctx, g):
        (w,) = ctx.saved_tensors
        return 2 * torch.diag_embed(w.view(-1)) @ g, None


class NeverFits(RowWeighted):
    """backward raises a shape error whatever w's layout (no marginal of a (2, 3, 4) or
    (3, 2, 5) tensor has a multiple of 7 elements)."""

    @staticmethod
    def backward(ctx, g):
        (w,) = ctx.saved_tensors
        return g * w.reshape(7, -1), None


def test_a_frozen_tensor_backward_views_as_a_marginal_gets_that_layout():
    found = synthesize(RowWeighted)
    assert isinstance(found, Synthesized) and not found.doubt, found
    x, w = found.args
    assert w.shape == (1, x.shape[1], 1) and not w.requires_grad
    assert torch.isclose(w.sum(), torch.ones((), dtype=w.dtype)) and (w > 0).all()
    assert "marginal" in found.description
    report = gradsmith.check(RowWeighted, *found.args)
    assert report.passed, report
    # the independent reference: autograd of the same expression
    xx = x.detach().clone().requires_grad_()
    g = torch.randn_like(xx)
    (xx * w).backward(g)
    torch.testing.assert_close(RowWeighted.backward(_Ctx(w), g)[0], xx.grad)


def test_a_planted_wrong_backward_on_the_marginal_layout_still_fails():
    found = synthesize(WrongRowWeighted)
    assert isinstance(found, Synthesized) and not found.doubt, found
    report = gradsmith.check(WrongRowWeighted, *found.args)
    assert not report.passed and "gradient-mismatch" in report.codes("error"), report


def test_a_shape_error_no_marginal_layout_avoids_is_a_doubt_not_a_defect():
    # synthesis proper: the public entry then asks the project's tests, i.e. this file
    found = _synthesize(NeverFits, 0)
    assert isinstance(found, Synthesized), found
    assert "marginals of the main tensor" in found.doubt and "w" in found.doubt, found.doubt


class _Ctx:
    def __init__(self, w):
        self.saved_tensors = (w,)
