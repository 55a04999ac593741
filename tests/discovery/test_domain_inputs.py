"""Zero-config inputs inside the domain a forward clamps to before its formula (issue 18,
corpus 4 part a: hyperbolic layers' ``artanh``/``arcosh`` clamp ``x`` a hair inside (-1, 1) and
(1, inf); on random normal inputs most values were clamped, forward was constant there, and
the formula's derivative in backward was called an ``undeclared-estimator``). A clamp that is
the operation itself (``clamp(0, 6)``) still gets values on both sides, so a backward that
forgets its mask still fails. Reduced cases, written here."""

import torch
from torch.autograd import Function
from torch.autograd.function import once_differentiable

import gradsmith
from gradsmith.discovery.synthesize import Synthesized, synthesize


def _artanh(sign: float):
    class Artanh(Function):
        @staticmethod
        def forward(ctx, x):
            x = x.clamp(-1 + 1e-15, 1 - 1e-15)
            ctx.save_for_backward(x)
            return 0.5 * (torch.log1p(x) - torch.log1p(-x))

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g / (1 + sign * x ** 2)

    return Artanh


def _clipped_relu(masked: bool):
    class ClippedReLU(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            x = x.clamp(0, 6)
            return x * 1.0

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * ((x > 0) & (x < 6)).to(g.dtype) if masked else g

    return ClippedReLU


def test_values_inside_the_clamped_domain_and_a_correct_formula_passes():
    right = _artanh(-1.0)
    found = synthesize(right)
    assert isinstance(found, Synthesized), found
    (x,) = found.args
    assert bool((x.abs() < 1).all()) and "in (-1, 1)" in found.description
    assert all(bool((v.args[0].abs() < 1).all()) for v in found.variants)
    g = torch.randn_like(x)
    (got,) = torch.autograd.grad(right.apply(x), x, g)
    (reference,) = torch.autograd.grad(torch.atanh(x), x, g)  # torch's own artanh
    torch.testing.assert_close(got, reference)
    report = gradsmith.check(right, *found.args)
    assert report.passed, report.codes("error")


def test_a_wrong_formula_inside_the_domain_still_fails():
    wrong = _artanh(1.0)
    found = synthesize(wrong)
    assert isinstance(found, Synthesized), found
    assert "gradient-mismatch" in gradsmith.check(wrong, *found.args).codes("error")


def test_a_clamp_that_is_the_operation_keeps_both_sides_and_a_missing_mask_fails():
    found = synthesize(_clipped_relu(False))
    assert isinstance(found, Synthesized), found
    (x,) = found.args
    assert bool((x < 0).any()) and "domain" not in found.description
    report = gradsmith.check(_clipped_relu(False), *found.args)
    assert not report.passed
    assert report.codes("error") & {"gradient-mismatch", "undeclared-estimator"}
    assert gradsmith.check(_clipped_relu(True), *found.args).passed
