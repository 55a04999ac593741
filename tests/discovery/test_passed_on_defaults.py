"""An argument forward only hands on to a helper gets the helper's default when nothing else runs.

``forward(ctx, input, stochastic=False)`` returns ``round_power_of_2(input, stochastic)``, whose
parameter is ``rounding='deterministic'`` and which asserts the mode is one of two strings:
forward's own default fails the assert on every call, every layout failed and the row was a skip
(corpus 13 held-out: DeepShift RoundPowerOf2, an STE). The helper states the kind and a working
value; synthesis tries it last and says where it was read. The reference: the same rounding
written with torch (sign(x) * 2 ** round(log2|x|)) and the identity gradient the STE declares;
a planted wrong backward FAILs against the printed declaration.
"""

from __future__ import annotations

import pytest
import torch
from torch.autograd import Function

import gradsmith
from gradsmith.discovery.passed_on import passed_on
from gradsmith.discovery.synthesize import Synthesized, synthesize


def _round(x, rounding="deterministic"):
    assert rounding in ["deterministic", "stochastic"]
    if rounding == "stochastic":
        floor = x.floor()
        return floor + torch.bernoulli(x - floor)
    return x.round()


def round_power_of_2(x, rounding="deterministic"):
    sign = torch.sign(x)
    shift = _round(torch.log2(x.abs()), rounding)
    return 2.0 ** shift * sign


class PowerOfTwoSTE(Function):
    @staticmethod
    def forward(ctx, input, stochastic=False):
        return round_power_of_2(input, stochastic)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output, None


class PowerOfTwoWrong(PowerOfTwoSTE):
    @staticmethod
    def backward(ctx, grad_output):
        return 2 * grad_output, None


class SameKind(Function):
    """forward's default is a string already: the helper's is not needed."""

    @staticmethod
    def forward(ctx, input, rounding="stochastic"):
        return round_power_of_2(input, rounding)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output, None


class TorchHelper(Function):
    @staticmethod
    def forward(ctx, input, dim=None):
        return torch.sum(input, dim) * input

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output, None


def _apply(fn, *args):
    """Not a caller of the class by name: synthesis would run a test naming it as a caller."""
    return fn.apply(*args)


def test_the_helpers_default_is_read_for_the_handed_argument():
    (value, why), = passed_on(PowerOfTwoSTE).values()
    assert value == "deterministic" and "round_power_of_2" in why and "`rounding`" in why
    assert passed_on(SameKind) == {} and passed_on(TorchHelper) == {}


def test_synthesis_uses_it_and_the_forward_is_the_reference():
    found = synthesize(PowerOfTwoSTE)
    assert isinstance(found, Synthesized), found
    x, mode = found.args
    assert mode == "deterministic" and "whose default that is" in found.description
    expected = torch.sign(x) * 2.0 ** torch.round(torch.log2(x.abs()))
    torch.testing.assert_close(_apply(PowerOfTwoSTE, x, mode), expected)
    with pytest.raises(AssertionError):
        _apply(PowerOfTwoSTE, x, False)  # forward's own default: no call works


def test_the_ste_passes_declared_and_a_planted_wrong_backward_fails():
    x = synthesize(PowerOfTwoSTE).args[0].detach().requires_grad_(True)
    report = gradsmith.check(PowerOfTwoSTE, x, "deterministic", compat=False)
    assert "undeclared-estimator" in report.codes("error"), report  # said, not passed
    declared = gradsmith.check(PowerOfTwoSTE, x, "deterministic", compat=False,
                               surrogate=lambda input, stochastic: input)
    assert declared.passed, declared
    wrong = gradsmith.check(PowerOfTwoWrong, x, "deterministic", compat=False,
                            surrogate=lambda input, stochastic: input)
    assert wrong.verdict == "FAILED", wrong
