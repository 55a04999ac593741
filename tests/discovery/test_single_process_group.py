"""A Function whose forward calls torch.distributed with no process group started (issue 18,
corpus 8b dev: an all-gather was a skip, "Default process group has not been initialized").

Zero-config gradsmith runs it in a group of one it starts itself (gloo, world size 1) and says
so in the Inputs column. There a gather is the identity: a backward wrong on every rank (a
planted 2x) FAILs, while a backward that drops the other ranks' gradients cannot show it, so a
row with no error is INCOMPLETE, never PASS. Reduced cases written here; the reference at world
size 1 is autograd of the identity.
"""

from __future__ import annotations

import json

import pytest
import torch
import torch.distributed as dist
from torch.autograd import Function

import gradsmith
from gradsmith.discovery import process_group
from gradsmith.discovery.synthesize import Synthesized, synthesize

pytestmark = pytest.mark.skipif(not dist.is_available(), reason="torch without distributed")


class GatherRows(Function):
    """all_gather along dim 0; backward keeps this rank's slice (right at world size 1 only)."""

    @staticmethod
    def forward(ctx, x):
        parts = [torch.empty_like(x) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, x.contiguous())
        ctx.n = x.shape[0]
        return torch.cat(parts, dim=0)

    @staticmethod
    def backward(ctx, g):
        rank = dist.get_rank()
        return g[rank * ctx.n:(rank + 1) * ctx.n]


class GatherRowsDoubled(GatherRows):
    """Planted: twice the gradient, wrong on every rank."""

    @staticmethod
    def backward(ctx, g):
        rank = dist.get_rank()
        return 2 * g[rank * ctx.n:(rank + 1) * ctx.n]


@pytest.fixture
def no_group(monkeypatch):
    """No process group before the test; the one it started destroyed after it."""
    assert not dist.is_initialized()
    monkeypatch.setattr(process_group, "_started", False)
    yield
    if dist.is_initialized():
        dist.destroy_process_group()


def test_a_group_of_one_is_started_and_said(no_group):
    found = synthesize(GatherRows)
    assert isinstance(found, Synthesized), found
    assert process_group.ASSUMED in found.description
    assert dist.get_world_size() == 1 and dist.get_rank() == 0
    (x,) = found.args
    g = torch.randn(x.shape, dtype=x.dtype)
    (got,) = torch.autograd.grad(GatherRows.apply(x), x, g)
    torch.testing.assert_close(got, g)  # autograd of the identity: a gather of one


def test_no_error_is_incomplete_not_pass(no_group):
    found = synthesize(GatherRows)
    report = gradsmith.check(GatherRows, *found.args, compat=False)
    assert report.verdict == "INCOMPLETE" and not report.passed, report
    (finding,) = report.incomplete
    assert finding.details["world_size"] == 1 and "other ranks" in finding.message


def test_a_backward_wrong_on_every_rank_fails(no_group):
    found = synthesize(GatherRowsDoubled)
    report = gradsmith.check(GatherRowsDoubled, *found.args, compat=False)
    assert report.verdict == "FAILED" and report.codes("error"), report


def test_a_users_own_group_is_kept_and_no_finding_added(no_group):
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    group = dist.group.WORLD
    found = synthesize(GatherRows)
    assert process_group.ASSUMED not in found.description and dist.group.WORLD is group
    assert gradsmith.check(GatherRows, *found.args, compat=False).passed


SOURCE = '''
import torch
import torch.distributed as dist
from torch.autograd import Function


class GatherRows(Function):
    @staticmethod
    def forward(ctx, x):
        parts = [torch.empty_like(x) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, x.contiguous())
        ctx.n = x.shape[0]
        return torch.cat(parts, dim=0)

    @staticmethod
    def backward(ctx, g):
        rank = dist.get_rank()
        return g[rank * ctx.n:(rank + 1) * ctx.n]
'''


def test_the_command_line_row_is_incomplete(tmp_path, monkeypatch, capsys, warm_worker_template):
    from gradsmith.cli import main

    (tmp_path / "gather.py").write_text(SOURCE)
    monkeypatch.chdir(tmp_path)
    code = main(["check", "gather.py", "--format", "json", "--timeout", "120"])
    (row,) = json.loads(capsys.readouterr().out)["results"]
    assert code != 0
    assert row["verdict"] == "fail" and row["error"] == "incomplete", row
    assert "world size 1" in row["inputs"]
    assert not dist.is_initialized()  # started in the task's process, not in this one


def _gathered_sizes(x, dim, sizes=None):
    if sizes is None:
        size = torch.tensor(x.shape[dim])
        sizes = [torch.empty_like(size) for _ in range(dist.get_world_size())]
        dist.all_gather(sizes, size)
        sizes = torch.stack(sizes)
    return sizes


class GatherSized(Function):
    """A gather with optional per-rank sizes (gathered by a helper when None), returned as a
    second output; backward splits by them and gives sizes no gradient."""

    @staticmethod
    def forward(ctx, x, dim, sizes):
        counts = _gathered_sizes(x, dim, sizes)
        parts = [torch.empty_like(x) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, x.contiguous())
        ctx.sizes, ctx.dim = counts.tolist(), dim
        return torch.cat(parts, dim=dim), counts

    @staticmethod
    def backward(ctx, g, _):
        return g.split(ctx.sizes, dim=ctx.dim)[dist.get_rank()], None, None


class Gather(torch.nn.Module):
    def __init__(self, *, dim=0):
        super().__init__()
        self.dim = dim

    def forward(self, x, sizes=None):
        return GatherSized.apply(x, self.dim, sizes)


def test_an_optional_tensor_without_gradient_is_tried_as_its_callers_none(no_group):
    # before: sizes a random float tensor of x's shape, forward ran, backward raised on it
    # (a backward-error that was the inputs', not the Function's)
    found = synthesize(GatherSized)
    assert found.args[2] is None and "sizes=None" in found.description, found.description
    report = gradsmith.check(GatherSized, *found.args, compat=False)
    assert report.verdict == "INCOMPLETE", report


class ReduceGrad(Function):
    """Megatron's copy region: identity forward; backward all-reduces the gradient (the sum of
    every rank's, right for rank-specific losses). Only backward asks for a group."""

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        g = g.clone()
        dist.all_reduce(g)
        return g


class ReduceGradDoubled(ReduceGrad):
    """Planted: twice the reduced gradient, wrong on every rank."""

    @staticmethod
    def backward(ctx, g):
        g = g.clone()
        dist.all_reduce(g)
        return 2 * g


def test_a_backward_asking_for_a_group_gets_one_and_is_incomplete(no_group):
    # before: forward ran without a group, backward raised "Default process group has not
    # been initialized" and the row was a backward-error, the check's environment blamed
    found = synthesize(ReduceGrad)
    assert isinstance(found, Synthesized) and not found.doubt, found
    assert process_group.ASSUMED in found.description
    (x,) = found.args
    g = torch.randn(x.shape, dtype=x.dtype)
    (got,) = torch.autograd.grad(ReduceGrad.apply(x), x, g)
    torch.testing.assert_close(got, g)  # autograd of the identity: a sum over one rank
    report = gradsmith.check(ReduceGrad, *found.args, compat=False)
    assert report.verdict == "INCOMPLETE" and "backward-error" not in report.codes("error")


def test_a_backward_wrong_on_every_rank_still_fails_when_backward_asked(no_group):
    found = synthesize(ReduceGradDoubled)
    report = gradsmith.check(ReduceGradDoubled, *found.args, compat=False)
    assert report.verdict == "FAILED" and report.codes("error"), report
    assert "backward-error" not in report.codes("error")


class LocalOnly(Function):
    """A module that imports torch.distributed but whose Function never calls it: no group."""

    @staticmethod
    def forward(ctx, x):
        return 2 * x

    @staticmethod
    def backward(ctx, g):
        return 2 * g


def test_no_group_is_started_when_nothing_asks_for_one(no_group):
    found = synthesize(LocalOnly)
    assert process_group.ASSUMED not in found.description and not dist.is_initialized()
