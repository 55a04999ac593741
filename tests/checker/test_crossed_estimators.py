"""A straight-through estimator whose finite differences are exactly 0 almost everywhere but not
where an element sits within the step of a data-dependent threshold (a ternary quantizer,
threshold 0.75 mean|x|: corpus 12b held-out mase ``Ternary``), past the 64 disagreeing elements
the gradients check re-judges. That element hid the pattern: a gradient-mismatch instead of
undeclared-estimator. Now the signature leaves it out, the printed identity surrogate is
checked, and a planted wrong backward still fails with it declared; a smooth forward's wrong
backward keeps its gradient-mismatch. Reduced cases written here; the reference for the right
backward is autograd of the identity surrogate.
"""

from __future__ import annotations

import torch
from torch.autograd import Function

import gradsmith
from gradsmith.discovery.synthesize import synthesize


class Ternarise(Function):
    @staticmethod
    def forward(ctx, x):
        delta = 0.75 * x.abs().mean()
        return (x > delta).to(x.dtype) - (x < -delta).to(x.dtype)

    @staticmethod
    def backward(ctx, g):
        return g.clone()


class ClampWrong(Function):
    """A clamp whose backward forgets the mask: flat outside [-1, 1], wrong there."""

    @staticmethod
    def forward(ctx, x):
        return x.clamp(-1, 1)

    @staticmethod
    def backward(ctx, g):
        return 2 * g


def _halved(cls):
    class Halved(cls):
        @staticmethod
        def backward(ctx, g):
            return 0.5 * g

    Halved.__name__ = f"{cls.__name__}Halved"
    return Halved


def _on_a_threshold():
    """80 inputs, the last within the check's step (1e-6) of the threshold, past the 64
    disagreeing elements the gradients check re-judges (in mase's Ternary the element was the
    73rd of 120)."""
    x = torch.randn(8, 10, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    x[-1, -1] = 0.0
    for _ in range(3):  # delta depends on the element itself
        x[-1, -1] = float(0.75 * x.abs().mean()) + 4e-7
    return x.requires_grad_()


def test_the_estimators_are_named_and_the_identity_surrogate_checked():
    for fn, args in ((Ternarise, (_on_a_threshold(),)),):
        report = gradsmith.check(fn, *args, compat=False)
        errors = report.codes("error")
        assert errors == {"undeclared-estimator"}, (fn.__name__, errors)
        (finding,) = report.errors
        assert finding.details["verified"], finding.details
        assert finding.details["declaration"].endswith("surrogate=lambda x: x)")
        declared = gradsmith.check(fn, *args, surrogate=lambda x: x, compat=False)
        assert declared.passed, (fn.__name__, declared.codes("error"))
        x = args[0].detach().clone().requires_grad_(True)
        (got,) = torch.autograd.grad(fn.apply(x).sum(), x)
        torch.testing.assert_close(got, torch.ones_like(x))  # the identity's gradient


def test_a_planted_wrong_backward_fails():
    for fn, args in ((Ternarise, (_on_a_threshold(),)),):
        wrong = _halved(fn)
        report = gradsmith.check(wrong, *args, surrogate=lambda x: x, compat=False)
        assert "surrogate-mismatch" in report.codes("error"), (wrong.__name__, report.codes("error"))


def test_a_wrong_backward_of_a_moving_forward_keeps_its_mismatch():
    report = gradsmith.check(ClampWrong, *synthesize(ClampWrong).args, compat=False)
    assert "gradient-mismatch" in report.codes("error"), report.codes("error")
