"""A process group started before gradsmith forks its tasks no longer hangs them (issue 18,
corpus 14d dev: soft-moe-pytorch ``AllGatherFunction``, judged correct, timed out after 30 s).

The environment's ``sitecustomize`` starts a gloo group of one at interpreter start; each task
runs in a fork, where the group's threads do not exist, so the first ``all_gather`` waited
forever. Each task now replaces an inherited group of one with its own. Reduced case written
here: a variable-length all-gather whose backward keeps this rank's slice. The correct one is
INCOMPLETE (world size 1 checks only the degenerate case, said in the row), in seconds; its
gradient equals autograd of the identity it is at world size 1 (the reference); a backward
that hands back its slice's rows reversed still FAILs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

SITE = """
import torch.distributed as dist
dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
"""

SOURCE = """
import torch
import torch.distributed as dist
from torch.autograd import Function


def _gather(x, dim):
    parts = [torch.empty_like(x) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, x.contiguous())
    sizes = [p.shape[dim] for p in parts]
    return torch.cat(parts, dim), sizes


class Gather(Function):
    @staticmethod
    def forward(ctx, x):
        out, ctx.sizes = _gather(x, 0)
        return out

    @staticmethod
    def backward(ctx, g):
        return g.split(ctx.sizes, 0)[dist.get_rank()]


class FlippedGather(Function):
    @staticmethod
    def forward(ctx, x):
        out, ctx.sizes = _gather(x, 0)
        return out

    @staticmethod
    def backward(ctx, g):
        return g.split(ctx.sizes, 0)[dist.get_rank()].flip(0)
"""


def _run(tmp_path, *code: str) -> tuple[dict, subprocess.CompletedProcess]:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITE)
    (tmp_path / "gather.py").write_text(SOURCE)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(tmp_path)]))
    done = subprocess.run(
        [sys.executable, "-m", "gradsmith", "check", "--format", "json", "--timeout", "60",
         *code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    rows = {r["name"].split("::")[-1]: r for r in json.loads(done.stdout)["results"]}
    return rows, done


def test_a_group_started_before_the_fork_is_renewed_not_hung(tmp_path):
    rows, done = _run(tmp_path, "gather.py::Gather", "gather.py::FlippedGather")
    right, wrong = rows["Gather"]["report"], rows["FlippedGather"]["report"]
    assert right["verdict"] == "INCOMPLETE", done.stdout[-2000:]
    assert rows["Gather"]["elapsed"] < 30
    assert any(f["code"] == "check-incomplete" and "world size 1" in f["message"]
               for f in right["findings"])
    # the environment's sitecustomize started the group, not gradsmith: the sentence says so
    said = " ".join(f["message"] for f in right["findings"] if f["code"] == "check-incomplete")
    assert "the environment started" in said and "gradsmith started" not in said
    assert not [f for f in right["findings"] if f["severity"] == "error"]
    # forward is the identity at world size 1, so a wrong backward reads as an undeclared
    # estimator (or a mismatch): an error either way, never a timeout or an INCOMPLETE
    assert wrong["verdict"] == "FAILED", done.stdout[-2000:]
    assert {f["code"] for f in wrong["findings"] if f["severity"] == "error"} \
        & {"gradient-mismatch", "undeclared-estimator"}


def test_the_reference_at_world_size_one():
    # The independent reference for the row above: at world size 1 the gather is the identity.
    import torch
    import torch.distributed as dist

    if dist.is_initialized():
        return
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        namespace: dict = {}
        exec(compile(SOURCE, "gather.py", "exec"), namespace)
        x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
        w = torch.randn(3, 4, dtype=torch.float64)
        got = torch.autograd.grad((namespace["Gather"].apply(x) * w).sum(), x)[0]
        torch.testing.assert_close(got, w)
        got = torch.autograd.grad((namespace["FlippedGather"].apply(x) * w).sum(), x)[0]
        assert not torch.allclose(got, w)
    finally:
        dist.destroy_process_group()
