"""Index arguments and ranks read from backward, and shape errors on tensors forward never
computed with (issue 18, corpus 11 held-out, task i). Reduced cases, written here.

- ``x[..., idx]`` in forward and ``g_x[..., idx] = g`` in backward: ``idx`` is a permutation
  of the last dimension. Synthesis gave the int 2 and backward raised (corpus 11b's
  pytorch-onn): now a permutation, on which the correct scatter passes and a planted wrong
  backward (the permutation applied again instead of inverted) fails.
- ``T[:, :, :3, :3]`` in backward: ``T`` has rank 4 at least (corpus 11a's pytorch_kinematics).
- A pass-through forward that only saves a table for backward: a backward shape error on
  every layout is the synthesised table's, a skip with the reason; a backward whose shape
  error is on tensors forward computed with stays a defect.
"""

import torch
from torch.autograd import Function

import gradsmith
from gradsmith.discovery.backward_shapes import read_backward_ranks
from gradsmith.discovery.hints import Hint
from gradsmith.discovery.synthesize import Synthesized, synthesize


class Permute(Function):
    @staticmethod
    def forward(ctx, x, idx):
        ctx.idx = idx
        return x[..., idx]

    @staticmethod
    def backward(ctx, g):
        idx = ctx.idx
        grad = g.clone()
        grad[..., idx] = g  # every position written once: the exact gradient of a gather
        return grad, None


class PermuteTwice(Permute):
    @staticmethod
    def backward(ctx, g):
        return g[..., ctx.idx], None  # planted: applies the permutation, not its inverse


def test_an_argument_indexing_a_dimension_there_and_back_is_a_permutation():
    found = synthesize(Permute)
    assert isinstance(found, Synthesized) and not found.doubt, found
    x, idx = found.args
    assert idx.dtype == torch.int64
    assert torch.equal(idx.sort().values, torch.arange(x.shape[-1]))
    assert gradsmith.check(Permute, *found.args).passed


def test_the_permutation_gradient_matches_autograd_of_the_gather():
    x = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
    idx = torch.randperm(5)
    g = torch.randn(3, 5, dtype=torch.float64)
    (ref,) = torch.autograd.grad(x[..., idx], x, g)
    (got,) = torch.autograd.grad(Permute.apply(x, idx), x, g)
    torch.testing.assert_close(got, ref)


def test_a_planted_wrong_permutation_backward_still_fails():
    found = synthesize(PermuteTwice)
    assert isinstance(found, Synthesized), found
    report = gradsmith.check(PermuteTwice, *found.args)
    assert not report.passed and "gradient-mismatch" in report.codes("error")


def test_a_subscript_in_backward_sets_the_rank():
    class Poses(Function):
        @staticmethod
        def forward(ctx, th, T):
            ctx.save_for_backward(T)
            return T * th.sum()

        @staticmethod
        def backward(ctx, g):
            (T,) = ctx.saved_tensors
            return (T[:, :, :3, 3] * g[:, :, :3, 3]).sum(), None

    hints = {"th": Hint(), "T": Hint()}
    read_backward_ranks(Poses, hints)
    assert hints["T"].rank_min == 4 and hints["th"].rank_min == 0


class Inject(Function):
    """Pass-through forward; backward reads a (rows, 3) axis table nothing sizes."""

    @staticmethod
    def forward(ctx, th, T, axes):
        ctx.save_for_backward(T, axes)
        return T

    @staticmethod
    def backward(ctx, g):
        T, axes = ctx.saved_tensors
        z = T[..., :3, :3] @ axes.unsqueeze(-1)
        return (z.squeeze(-1) * g[..., :3, 3]).sum(-1).T.sum(0, keepdim=True), None, None


class WrongTranspose(Function):
    """Forward computes with both tensors; backward's matmul forgets a transpose: a defect."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x @ w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g @ w, x.T @ g  # planted: g @ w.T


def test_a_shape_error_on_a_tensor_forward_only_saves_is_a_doubt():
    found = synthesize(Inject)
    assert isinstance(found, Synthesized), found
    assert "only saves" in found.doubt and "axes" in found.doubt


def test_a_shape_error_on_tensors_forward_computed_with_stays_a_defect():
    found = synthesize(WrongTranspose)
    assert isinstance(found, Synthesized), found
    assert "only saves" not in found.doubt
    assert not gradsmith.check(WrongTranspose, *found.args).passed
