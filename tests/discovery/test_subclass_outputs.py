"""An output gradsmith cannot read is a reason, never an internal error (issue 18, snngrow).

A reduced case, written here, of a spiking library: a Heaviside forward whose helper returns a
float wrapper subclass holding booleans when ``spike_out`` is true. ``torch.isfinite`` on it
runs ``abs`` on the booleans and raises; zero-config gave ``spike_out`` the float 0.1 (true),
and the probe's finiteness test raised out of input building ("building the example inputs
raised NotImplementedError: abs_cpu not implemented for 'Bool'"). The helper's annotation
``spike_out: bool = False`` says it is a flag.
"""

from __future__ import annotations

import torch
from torch.autograd import Function
from torch.utils._pytree import tree_map

import gradsmith
from gradsmith.discovery import Synthesized, synthesize
from gradsmith.discovery.probe import probe


class BoolSpikes(torch.Tensor):
    """A float32 tensor in name whose values are booleans."""

    @staticmethod
    def __new__(cls, elem):
        return torch.Tensor._make_wrapper_subclass(cls, elem.shape, dtype=torch.float32)

    def __init__(self, elem):
        self.elem = elem

    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func, types, args, kwargs=None):
        def unwrap(t):
            return t.elem if isinstance(t, BoolSpikes) else t

        return func(*tree_map(unwrap, args), **tree_map(unwrap, kwargs or {}))


def heaviside(x, spike_out: bool = False):
    if spike_out:
        return BoolSpikes(x >= 0)
    return (x >= 0).to(x)


class SigmoidSpike(Function):
    @staticmethod
    def forward(ctx, x, alpha, spike_out):
        ctx.save_for_backward(x)
        ctx.alpha = alpha
        return heaviside(x, spike_out)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(ctx.alpha * x)
        return g * ctx.alpha * s * (1 - s), None, None


class SigmoidSpikeWrongSlope(SigmoidSpike):
    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(ctx.alpha * x)
        return g * s * (1 - s), None, None      # bug: the slope alpha is dropped


def test_an_unreadable_output_is_a_probe_failure_with_its_reason():
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    got = probe(SigmoidSpike.apply, [x, 4.0, True])
    assert isinstance(got, str)
    assert "BoolSpikes" in got and "cannot be tested for finite values" in got
    assert probe(SigmoidSpike.apply, [x, 4.0, False]) is True


def test_a_flag_a_helper_annotates_as_bool_is_false_and_the_surrogate_is_checked():
    found = synthesize(SigmoidSpike)
    assert isinstance(found, Synthesized), found
    x, alpha, spike_out = found.args
    assert spike_out is False and "spike_out=False" in found.description
    # Independent reference: the forward is the Heaviside step, torch's own.
    out = SigmoidSpike.apply(*found.args)
    torch.testing.assert_close(out, torch.heaviside(x.detach(), torch.tensor(1.0).to(x)))

    def surrogate(x, alpha, spike_out):
        return torch.sigmoid(alpha * x)

    assert gradsmith.check(SigmoidSpike, *found.args, surrogate=surrogate).passed
    wrong = gradsmith.check(SigmoidSpikeWrongSlope, *found.args, surrogate=surrogate)
    assert not wrong.passed and wrong.codes("error")
