"""A backward that raises on index values synthesis invented is a skip with a reason, not a
backward-error (issue 18, corpus 4 part a: a spline's knot offsets, a float tensor forward
casts to integers and adds to floored inputs, were made random normal; forward's indexing
wrapped the negative indices, backward's scatter_add_ rejected them: a false alarm on a
correct Function). An index error with no cast argument behind it stays a defect. Reduced
cases, written here."""

import torch
from torch.autograd import Function

from gradsmith.discovery.synthesize import Synthesized, synthesize


class Spline(Function):
    """Piecewise-constant lookup of coefficients at (offset + floor(x))."""

    @staticmethod
    def forward(ctx, x, coefficients, offsets):
        indexes = (offsets.view(-1, 1) + torch.floor(x)).long()
        ctx.save_for_backward(indexes, coefficients)
        return coefficients.view(-1)[indexes] * x

    @staticmethod
    def backward(ctx, g):
        indexes, coefficients = ctx.saved_tensors
        grad = torch.zeros_like(coefficients.view(-1))
        grad.scatter_add_(0, indexes.view(-1), g.reshape(-1))
        return None, grad.view_as(coefficients), None


class OffByOne(Function):
    """A backward that reads one element past its gradient: a real defect."""

    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2 + g.reshape(-1)[g.numel()]


def test_an_index_error_from_values_forward_casts_to_integers_is_a_doubt():
    found = synthesize(Spline)
    assert isinstance(found, Synthesized), found
    assert "turns the values of" in found.doubt and "offsets" in found.doubt
    assert "valid indices" in found.doubt


def test_an_index_error_with_no_cast_argument_stays_the_functions():
    found = synthesize(OffByOne)
    assert isinstance(found, Synthesized), found
    assert found.doubt == ""
