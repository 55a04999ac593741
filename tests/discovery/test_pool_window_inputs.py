"""An argument forward hands to a pooling function as its window (``F.avg_pool2d(x, kernel)``)
is a tuple of ints, one per spatial dimension, and the pooled tensor is (batch, channels,
*spatial) (issue 18, corpus 7b: SNN_Activation_Driven's AdjustedAvgPoolFunc was skipped,
"kernel_size must be tuple of ints, not float"). Reduced cases written here: average pooling
with backward spreading g / k^2 (correct), the same missing the division (planted wrong),
and a pooling estimator whose printed declaration passes as printed."""

from __future__ import annotations

import importlib.util
import textwrap

import pytest
import torch
import torch.nn.functional as F

import gradsmith
from gradsmith.discovery import Synthesized, synthesize

CASE = '''
import torch
import torch.nn.functional as F


class WindowPool(torch.autograd.Function):
    @staticmethod
    def forward(ctx, inputs, kernel):
        ctx.save_for_backward(torch.tensor(inputs.shape), torch.tensor(kernel))
        return F.avg_pool2d(inputs, kernel)

    @staticmethod
    def backward(ctx, grad):
        shape, kernel = ctx.saved_tensors
        (h, w), (kh, kw) = shape.tolist()[2:], kernel.tolist()
        up = grad.repeat_interleave(kh, -2).repeat_interleave(kw, -1) / (kh * kw)
        return F.pad(up, (0, w - up.shape[-1], 0, h - up.shape[-2])), None


class WindowPoolWrong(WindowPool):
    @staticmethod
    def backward(ctx, grad):
        shape, kernel = ctx.saved_tensors
        (h, w), (kh, kw) = shape.tolist()[2:], kernel.tolist()
        up = grad.repeat_interleave(kh, -2).repeat_interleave(kw, -1)  # no 1 / (kh kw)
        return F.pad(up, (0, w - up.shape[-1], 0, h - up.shape[-2])), None
'''


@pytest.fixture(scope="module")
def module(tmp_path_factory):
    path = tmp_path_factory.mktemp("windows") / "window_case.py"
    path.write_text(textwrap.dedent(CASE))
    spec = importlib.util.spec_from_file_location("window_case", path)
    found = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(found)  # source must be readable: the hints parse it
    return found


def test_the_window_is_a_tuple_of_ints_and_the_input_is_batched(module):
    found = synthesize(module.WindowPool)
    assert isinstance(found, Synthesized), found
    x, kernel = found.args
    assert kernel == (2, 2) and x.dim() == 4
    # Independent reference: autograd of torch's own avg_pool2d on the same inputs
    leaf = x.detach().clone().requires_grad_(True)
    (want,) = torch.autograd.grad(F.avg_pool2d(leaf, kernel).pow(2).sum(), leaf)
    leaf = x.detach().clone().requires_grad_(True)
    (got,) = torch.autograd.grad(module.WindowPool.apply(leaf, kernel).pow(2).sum(), leaf)
    torch.testing.assert_close(got, want)


def test_correct_pooling_passes_and_the_planted_wrong_one_fails(module):
    x, kernel = synthesize(module.WindowPool).args
    assert gradsmith.check(module.WindowPool, x.detach(), kernel).passed
    wrong = gradsmith.check(module.WindowPoolWrong, x.detach(), kernel)
    assert "gradient-mismatch" in wrong.codes("error"), str(wrong)


def test_a_window_the_code_uses_as_an_int_stays_an_int(tmp_path):
    """``k * k`` after ``range(k)``: the code says int; a tuple would make forward raise."""
    path = tmp_path / "int_window.py"
    path.write_text(textwrap.dedent('''
        import torch
        import torch.nn.functional as F


        class IntWindow(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, k):
                ctx.k = [1 for _ in range(k)]
                return F.avg_pool2d(x, k) * (k * k)

            @staticmethod
            def backward(ctx, g):
                k = len(ctx.k)
                return g.repeat_interleave(k, -2).repeat_interleave(k, -1), None
    '''))
    spec = importlib.util.spec_from_file_location("int_window", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    from gradsmith.discovery.hints import forward_hints

    hints = forward_hints(module.IntWindow.forward, ["x", "k"], module.IntWindow)
    assert hints["k"].kind == "int" and hints["k"].window == 0
    found = synthesize(module.IntWindow)
    assert isinstance(found, Synthesized), found
    assert type(found.args[1]) is int
