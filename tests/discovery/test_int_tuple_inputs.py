"""Parameters the code uses as sequences of integers get one-element int tuples.

Reduced from corpus 11a dev (torch-named-linops ``ArrayToBlocksFn``): blocks of the trailing
dimension, ``input.shape[-len(block_shape):]`` and ``zip(block_shape, stride)``. Synthesis made
``block_shape`` a float tensor and ``stride`` the int 1: every layout failed, a skip.
"""

from __future__ import annotations

import torch
from torch.autograd import Function

import gradsmith
from gradsmith.discovery.int_tuples import int_sequences
from gradsmith.discovery.synthesize import Synthesized, synthesize


class Blocks(Function):
    """Overlapping blocks of the last dimension (one blocked dimension)."""

    @staticmethod
    def forward(ctx, x, block_shape, stride):
        ctx.im_size = tuple(x.shape[-len(block_shape):])
        ctx.pairs = list(zip(block_shape, stride))
        (b, s), = ctx.pairs
        return x.unfold(-1, b, s).contiguous()

    @staticmethod
    def backward(ctx, g):
        (b, s), = ctx.pairs
        grad = g.new_zeros(*g.shape[:-2], ctx.im_size[-1])
        for j in range(g.shape[-2]):
            grad[..., j * s:j * s + b] += g[..., j, :]
        return grad, None, None


class WrongBlocks(Blocks):
    """Planted: overlapping blocks overwrite each other's gradient instead of adding."""

    @staticmethod
    def backward(ctx, g):
        (b, s), = ctx.pairs
        grad = g.new_zeros(*g.shape[:-2], ctx.im_size[-1])
        for j in range(g.shape[-2]):
            grad[..., j * s:j * s + b] = g[..., j, :]
        return grad, None, None


def test_len_and_zip_make_int_sequences_and_tensors_stay_tensors():
    assert int_sequences(Blocks, Blocks.forward, ["x", "block_shape", "stride"]) == {
        "block_shape", "stride"}


def test_the_blocks_get_int_tuples_and_pass():
    found = synthesize(Blocks)
    assert isinstance(found, Synthesized) and not found.doubt, found
    x, block_shape, stride = found.args
    assert block_shape == (2,) and stride == (1,)
    assert gradsmith.check(Blocks, *found.args).passed
    # independent reference: autograd of torch's own unfold
    xx = x.detach().clone().requires_grad_()
    g = torch.randn(*x.shape[:-1], x.shape[-1] - 1, 2, dtype=x.dtype)
    xx.unfold(-1, 2, 1).backward(g)
    torch.testing.assert_close(Blocks.backward(_Ctx(x.shape), g)[0], xx.grad)


def test_a_planted_overwriting_backward_still_fails():
    found = synthesize(WrongBlocks)
    assert isinstance(found, Synthesized), found
    report = gradsmith.check(WrongBlocks, *found.args)
    assert not report.passed and "gradient-mismatch" in report.codes("error"), report


class _Ctx:
    def __init__(self, shape):
        self.im_size, self.pairs = tuple(shape[-1:]), [(2, 1)]


def test_annotations_decide_over_uses():
    def forward(ctx, x, grid: tuple[int, ...], width: float | tuple[float, ...]):
        n = len(width) if isinstance(width, tuple) else len(grid)  # len(): a sequence use
        return x * n

    assert int_sequences(None, forward, ["x", "grid", "width"]) == {"grid"}
