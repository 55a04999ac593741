"""Training under DistributedDataParallel (2 processes, gloo, CPU) equals one process, dropout
included.

The model uses gradsmith's Attention (with attention dropout) inside a CheckpointedSequential.
Every process seeds the global RNG identically before each step, so all draw the same dropout
seed; rank r sets ``dropout_batch_offset`` to the index of its first sample, so its masks are the
ones the single process draws for those samples. DDP averages the two half-batch gradients, which
equals the full-batch gradient of a mean loss.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from gradsmith.ops._attention import Attention
from gradsmith.ops._checkpoint import CheckpointedSequential

WORLD, BATCH, STEPS, DIM = 2, 8, 3, 16


class Block(nn.Module):
    """Pre-norm causal self-attention with a residual connection."""

    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(DIM)
        self.attn = Attention(DIM, 4, dropout=0.25, batch_first=True)

    def forward(self, x):
        return x + self.attn(self.norm(x), is_causal=True)


def make_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, DIM), CheckpointedSequential(
        Block(), nn.Linear(DIM, DIM), nn.GELU(), Block(), segments=2), nn.Linear(DIM, 1)).double()


def set_offset(model: nn.Module, offset: int) -> None:
    for m in model.modules():
        if isinstance(m, Attention):
            m.dropout_batch_offset = offset


def data():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(STEPS, BATCH, 5, 6, generator=g, dtype=torch.float64)
    y = torch.randn(STEPS, BATCH, 5, 1, generator=g, dtype=torch.float64)
    return x, y


def train(model, xs, ys, offset=0):
    set_offset(model, offset)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for step in range(STEPS):
        torch.manual_seed(100 + step)  # same dropout seed draw in every process
        loss = (model(xs[step]) - ys[step]).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


def worker(rank: int, port: int, out_dir: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    try:
        model = DistributedDataParallel(make_model())
        xs, ys = data()
        half = BATCH // WORLD
        rows = slice(rank * half, (rank + 1) * half)
        train(model, xs[:, rows], ys[:, rows], offset=rank * half)
        torch.save(model.module.state_dict(), Path(out_dir) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ddp_two_processes_equal_one_process_on_the_full_batch(tmp_path):
    # spawned children import this module by name; make its folder importable for them
    here = str(Path(__file__).parent)
    if here not in sys.path:
        sys.path.insert(0, here)
    from test_ddp import worker as importable_worker

    mp.spawn(importable_worker, args=(free_port(), str(tmp_path)), nprocs=WORLD, join=True)

    single = make_model()
    xs, ys = data()
    train(single, xs, ys)
    want = single.state_dict()
    before = make_model().state_dict()
    for rank in range(WORLD):
        got = torch.load(tmp_path / f"rank{rank}.pt")
        assert got.keys() == want.keys()
        for name in want:
            torch.testing.assert_close(got[name], want[name], rtol=1e-9, atol=1e-11,
                                       msg=f"rank {rank}: {name}")
    assert any(not torch.equal(want[n], before[n]) for n in want), "training changed nothing"


def test_dropout_is_active_so_the_equality_above_covers_it():
    model = make_model()
    x = data()[0][0]
    torch.manual_seed(7)
    a = model(x)
    torch.manual_seed(8)
    b = model(x)
    assert not torch.allclose(a, b)
