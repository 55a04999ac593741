"""A hyperparameter that defaults to None but that the code requires gets a number (issue 18,
corpus 9b dev: CalibTIP's UniformQuantize skipped, every layout raising ``assert num_bits is not
None``; UniformQuantizeGrad failed backward-error, forward storing the None that backward's
assert rejects). Reduced cases written here: after the plans that keep None, a plan gives
such a parameter the number a required one of its kind gets (``num_bits`` 8). The
straight-through quantizer is then an undeclared estimator whose printed declaration passes,
and a planted ``-g`` backward still FAILs under it."""

from __future__ import annotations

import re

import torch
from torch.autograd import Function

import gradsmith
from gradsmith.discovery import Synthesized, synthesize
from gradsmith.discovery.none_required import required_numbers


class Quant(Function):
    @staticmethod
    def forward(ctx, x, num_bits=None, levels=None):
        assert num_bits is not None or levels is not None, "either provide levels or num_bits"
        if levels is None:
            levels = 2.0 ** num_bits - 1
        return torch.round(x * levels) / levels

    @staticmethod
    def backward(ctx, g):
        return g, None, None


class QuantNegated(Quant):
    @staticmethod
    def backward(ctx, g):
        return -g, None, None  # planted: the straight-through gradient with the wrong sign


class QuantGrad(Function):
    """Identity forward; backward rounds the gradient to ``num_bits``, required there."""

    @staticmethod
    def forward(ctx, x, num_bits=None, stochastic=False):
        ctx.num_bits = num_bits
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        if ctx.num_bits is None:
            raise ValueError("num_bits is required")
        return torch.round(g * 2 ** ctx.num_bits) / 2 ** ctx.num_bits, None, None


class Optional(Function):
    """``scale=None`` is a real option here (no guard): it stays None."""

    @staticmethod
    def forward(ctx, x, scale=None):
        ctx.scale = 1.0 if scale is None else scale
        return x * ctx.scale

    @staticmethod
    def backward(ctx, g):
        return g * ctx.scale, None


def test_a_required_none_default_gets_a_number_and_forward_runs():
    found = synthesize(Quant)
    assert isinstance(found, Synthesized), found
    _, num_bits, levels = found.args
    assert (num_bits, levels) != (None, None) and not found.doubt, found.description
    assert num_bits == 8  # the table's number of bits, tried after the None plan


def test_the_quantizer_is_an_estimator_whose_printed_declaration_passes_and_negated_fails():
    report = gradsmith.check(Quant, *synthesize(Quant).args)
    assert report.codes("error") == {"undeclared-estimator"}, report.summary()
    (f,) = report.errors
    assert f.details["verified"], f.details["declaration"]
    factory, source = re.search(r"example\((lambda: .*), surrogate=(lambda .*)\)$",
                                f.details["declaration"]).groups()
    args = eval(factory, {"torch": torch})()  # noqa: S307 - gradsmith's own line, as printed
    declared = eval(source, {"torch": torch})  # noqa: S307
    assert gradsmith.check(Quant, *args, surrogate=declared).passed
    wrong = gradsmith.check(QuantNegated, *args, surrogate=declared)
    assert not wrong.passed and wrong.codes("error"), wrong.summary()
    # the straight-through gradient is autograd's of the identity
    x = args[0].detach().clone().requires_grad_()
    g = torch.randn(x.shape, dtype=x.dtype, generator=torch.Generator().manual_seed(1))
    (got,) = torch.autograd.grad(Quant.apply(x, *args[1:]), x, g)
    y = x.detach().clone().requires_grad_()
    (want,) = torch.autograd.grad(y * 1, y, g)
    torch.testing.assert_close(got, want)


def test_a_number_backward_requires_through_ctx_is_given_so_backward_runs():
    found = synthesize(QuantGrad)
    assert isinstance(found, Synthesized) and not found.doubt, found
    assert found.args[1] == 8, found.description
    report = gradsmith.check(QuantGrad, *found.args)
    assert "backward-error" not in report.codes("error"), report.summary()


def test_an_unguarded_none_default_stays_none():
    assert required_numbers(Optional, Optional.forward, ["x", "scale"]) == set()
    assert synthesize(Optional).args[1] is None
