"""Soft ranking and quantization-aware training under DistributedDataParallel (2 processes,
gloo, CPU) give the same parameters as one process on the full batch.

The model quantizes activations with PACT and FakeQuantizeLSQ and is trained with a soft-rank
(Spearman-style) loss plus a soft-sort loss, so every op of catalog part 2b and every learned
quantization parameter (PACT's alpha, LSQ's step size) takes part. LSQ's step size is initialised
before DDP wraps the model (the documented way: its data-dependent initialisation would otherwise
run on each rank's own half batch) and its gradient scale is given explicitly: the default
1/sqrt(numel(x) * Qp) counts the local batch, which differs between one and two processes (the
paper's N_F for activations is the number of features of one example).
"""

from __future__ import annotations

import math
import os
import socket
import sys
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from gradsmith.ops._pact import PACT
from gradsmith.ops._quant import FakeQuantizeLSQ
from gradsmith.ops._soft_sort import soft_rank, soft_sort

WORLD, BATCH, STEPS, N = 2, 8, 3, 10


def make_model() -> nn.Module:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(N, 16), PACT(bits=4, alpha=0.5), nn.Linear(16, N),
                          FakeQuantizeLSQ(bits=6, grad_scale=1 / math.sqrt(N * 31))).double()
    model(data()[0][0])  # initialise the LSQ step size identically on every process
    return model


def data():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(STEPS, BATCH, N, generator=g, dtype=torch.float64)
    target = torch.randn(STEPS, BATCH, N, generator=g, dtype=torch.float64)
    return x, target


def loss_fn(out, target):
    rank_loss = (soft_rank(out, "l2", 0.5) - target.argsort(-1).argsort(-1) - 1).square()
    sort_loss = (soft_sort(out, "kl", 1.0) - target.sort(-1).values).square()
    return rank_loss.mean() + sort_loss.mean()


def train(model, xs, ts):
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(STEPS):
        loss = loss_fn(model(xs[step]), ts[step])
        opt.zero_grad()
        loss.backward()
        opt.step()


def worker(rank: int, port: int, out_dir: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    try:
        model = DistributedDataParallel(make_model())
        xs, ts = data()
        half = BATCH // WORLD
        rows = slice(rank * half, (rank + 1) * half)
        train(model, xs[:, rows], ts[:, rows])
        torch.save(model.module.state_dict(), Path(out_dir) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ddp_two_processes_equal_one_process_on_the_full_batch(tmp_path):
    here = str(Path(__file__).parent)
    if here not in sys.path:
        sys.path.insert(0, here)
    from test_ddp_sort_quant import worker as importable_worker

    mp.spawn(importable_worker, args=(free_port(), str(tmp_path)), nprocs=WORLD, join=True)

    single = make_model()
    before = {k: v.clone() for k, v in single.state_dict().items()}
    xs, ts = data()
    train(single, xs, ts)
    want = single.state_dict()
    for rank in range(WORLD):
        got = torch.load(tmp_path / f"rank{rank}.pt")
        assert got.keys() == want.keys()
        for name in want:
            torch.testing.assert_close(got[name], want[name], rtol=1e-9, atol=1e-11,
                                       msg=f"rank {rank}: {name}")
    # The quantization parameters were really trained (their gradients were all-reduced).
    for name in ("1.alpha", "3.scale"):
        assert not torch.equal(want[name], before[name]), f"{name} did not move"
