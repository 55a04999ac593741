"""A Function whose collective branch never ran is INCOMPLETE, not PASS (corpus 12d held-out:
an all-gather whose forward returns ``(x,)`` when no process group exists PASSed, its gather
and its backward all-reduce never exercised).

A PASS means every applicable check ran: with no group, only the identity branch was checked.
A backward wrong on that branch still FAILs; a Function that only reads the rank (no
collective) still PASSes. Reduced cases written here; the reference is autograd of the
identity (the single-process branch).
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from torch.autograd import Function

import gradsmith
from gradsmith.discovery.collectives import called

pytestmark = pytest.mark.skipif(not dist.is_available(), reason="torch without distributed")


def _gather(x):
    out = [torch.zeros_like(x) for _ in range(dist.get_world_size())]
    dist.all_gather(out, x.contiguous())
    return torch.cat(out)


class GatherOrIdentity(Function):
    """all-gather on dim 0 across ranks; the identity when no group exists."""

    @staticmethod
    def forward(ctx, x):
        ctx.world = dist.get_world_size() if dist.is_initialized() else 1
        if ctx.world == 1:
            return x.clone()
        return _gather(x)

    @staticmethod
    def backward(ctx, g):
        if ctx.world == 1:
            return g
        g = g.clone()
        dist.all_reduce(g)
        return g.chunk(ctx.world)[dist.get_rank()]


class GatherOrIdentityDoubled(GatherOrIdentity):
    """Planted: the single-process backward is twice the gradient."""

    @staticmethod
    def backward(ctx, g):
        return 2 * g if ctx.world == 1 else GatherOrIdentity.backward(ctx, g)


class RankScaled(Function):
    """Reads the rank (0 without a group) and calls no collective: fully checked alone."""

    @staticmethod
    def forward(ctx, x):
        ctx.k = 1.0 + (dist.get_rank() if dist.is_initialized() else 0)
        return x * ctx.k

    @staticmethod
    def backward(ctx, g):
        return g * ctx.k


def _x():
    gen = torch.Generator().manual_seed(0)
    return torch.randn(3, 4, generator=gen, dtype=torch.float64, requires_grad=True)


def test_the_collectives_are_read_from_the_code():
    assert called(GatherOrIdentity) == ["all_gather", "all_reduce"]  # one helper deep
    assert called(RankScaled) == []


def test_an_unexercised_gather_is_incomplete_not_pass():
    assert not dist.is_initialized()
    x = _x()
    g = torch.randn(3, 4, dtype=torch.float64)
    (got,) = torch.autograd.grad(GatherOrIdentity.apply(x), x, g)
    torch.testing.assert_close(got, g)  # right on the branch that runs: the identity
    report = gradsmith.check(GatherOrIdentity, x, compat=False)
    assert report.verdict == "INCOMPLETE" and not report.errors, report
    (finding,) = report.incomplete
    assert "all_gather" in finding.message and "never ran" in finding.message


def test_a_wrong_backward_on_the_branch_that_runs_fails():
    report = gradsmith.check(GatherOrIdentityDoubled, _x(), compat=False)
    assert report.verdict == "FAILED" and report.errors  # 2x: a scaled gradient, an error


def test_no_collective_still_passes():
    assert gradsmith.check(RankScaled, _x(), compat=False).verdict == "PASSED"
