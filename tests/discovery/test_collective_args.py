"""A forward's parameters handed to a torch.distributed function as its ``group`` or ``op``
are synthesised as the default group (None) and ReduceOp.SUM, not tensors (corpus 14d
held-out: ``_AllReduce(op, group, tensor)``, ``GatherAllLogits(logits, sp_group)`` and the
all-to-alls were skipped: "Boolean value of Tensor with more than one value is ambiguous").
Reduced cases written here; the reference at world size 1 is autograd of the identity.
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from torch.autograd import Function

import gradsmith
from gradsmith.discovery import process_group
from gradsmith.discovery.synthesize import Synthesized, synthesize

pytestmark = pytest.mark.skipif(not dist.is_available(), reason="torch without distributed")


class AllReduce(Function):
    """all_reduce with the caller's op and group; backward all-reduces the gradient (SUM)."""

    @staticmethod
    def forward(ctx, op, group, tensor):
        ctx.group, ctx.op = group, op
        tensor = tensor.clone()
        dist.all_reduce(tensor, op=op, group=group)
        return tensor

    @staticmethod
    def backward(ctx, g):
        return None, None, AllReduce.apply(ctx.op, ctx.group, g)


class AllReduceDoubled(AllReduce):
    """Planted: twice the gradient, wrong on every rank."""

    @staticmethod
    def backward(ctx, g):
        return None, None, 2 * AllReduce.apply(ctx.op, ctx.group, g)


class Gather(Function):
    """all_gather_into_tensor along dim 0 of a group passed positionally and annotated."""

    @staticmethod
    def forward(ctx, x, sp_group: dist.ProcessGroup):
        size = dist.get_world_size(sp_group)
        ctx.rank, ctx.n = dist.get_rank(sp_group), x.shape[0]
        out = torch.zeros((x.shape[0] * size,) + x.shape[1:], dtype=x.dtype)
        dist.all_gather_into_tensor(out, x.contiguous(), group=sp_group)
        return out

    @staticmethod
    def backward(ctx, g):
        return g[ctx.rank * ctx.n:(ctx.rank + 1) * ctx.n], None


@pytest.fixture
def no_group(monkeypatch):
    """No process group before the test; the one it started destroyed after it."""
    assert not dist.is_initialized()
    monkeypatch.setattr(process_group, "_started", False)
    yield
    if dist.is_initialized():
        dist.destroy_process_group()


def test_group_and_op_are_not_tensors(no_group):
    found = synthesize(AllReduce)
    assert isinstance(found, Synthesized), found
    op, group, x = found.args
    assert op == dist.ReduceOp.SUM and group is None and isinstance(x, torch.Tensor)
    g = torch.randn(x.shape, dtype=x.dtype)
    (got,) = torch.autograd.grad(AllReduce.apply(op, group, x), x, g)
    torch.testing.assert_close(got, g)  # a sum over one rank is the identity


def test_right_is_incomplete_and_planted_wrong_fails(no_group):
    found = synthesize(AllReduce)
    report = gradsmith.check(AllReduce, *found.args, compat=False)
    assert report.verdict == "INCOMPLETE" and not report.codes("error"), report
    wrong = synthesize(AllReduceDoubled)
    report = gradsmith.check(AllReduceDoubled, *wrong.args, compat=False)
    assert report.verdict == "FAILED" and report.codes("error"), report


def test_a_positional_annotated_group(no_group):
    found = synthesize(Gather)
    assert isinstance(found, Synthesized), found
    x, group = found.args
    assert group is None and isinstance(x, torch.Tensor) and x.requires_grad
    report = gradsmith.check(Gather, *found.args, compat=False)
    assert report.verdict == "INCOMPLETE" and not report.codes("error"), report
