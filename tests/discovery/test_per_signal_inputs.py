"""Zero-config inputs for a loop over a batch of signals that reads one value per signal
(issue 18, corpus 4 part a: a numba-compiled compressor, ``for b in prange(B): g = zi[b]``,
failed on every layout, since no layout paired (batch, time) with a (batch,) vector). A
reduced case with a NumPy loop, written here."""

import numpy as np
import torch
from torch.autograd import Function

import gradsmith
from gradsmith.discovery.synthesize import Synthesized, synthesize


def _loop(x: np.ndarray, zi: np.ndarray) -> np.ndarray:
    B, T = x.shape
    y = np.empty_like(x)
    for b in range(B):
        g = zi[b]
        for t in range(T):
            y[b, t] = g * x[b, t]
    return y


def _gain(wrong: bool):
    class Gain(Function):
        """Each signal scaled by its own gain, computed by a loop over signals and steps."""

        @staticmethod
        def forward(ctx, x, zi):
            ctx.save_for_backward(x, zi)
            return torch.from_numpy(_loop(x.detach().numpy(), zi.detach().numpy()))

        @staticmethod
        def backward(ctx, g):
            x, zi = ctx.saved_tensors
            return g * zi.unsqueeze(1), (g if wrong else g * x).sum(1)

    return Gain


def test_a_batch_of_signals_and_one_value_per_signal_is_synthesised():
    right = _gain(False)
    found = synthesize(right)
    assert isinstance(found, Synthesized), found
    x, zi = found.args
    assert x.dim() == 2 and zi.shape == (x.shape[0],)
    g = torch.randn_like(x)
    got = torch.autograd.grad(right.apply(x, zi), (x, zi), g)
    reference = torch.autograd.grad(zi.unsqueeze(1) * x, (x, zi), g)  # the same, in torch
    torch.testing.assert_close(got, reference)
    assert gradsmith.check(right, *found.args).passed


def test_a_wrong_gradient_for_the_per_signal_value_fails():
    wrong = _gain(True)
    found = synthesize(wrong)
    assert isinstance(found, Synthesized), found
    assert "gradient-mismatch" in gradsmith.check(wrong, *found.args).codes("error")
