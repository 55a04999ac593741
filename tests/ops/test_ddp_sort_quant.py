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
import sys
from pathlib import Path

import torch
from torch import nn

from gradsmith.ops._pact import PACT
from gradsmith.ops._quant import FakeQuantizeLSQ
from gradsmith.ops._soft_sort import soft_rank, soft_sort

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ddp_harness import assert_same_parameters, train_ddp  # noqa: E402

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


def train(model, xs, ts, offset=0):
    # offset (the shard's first sample) matters only to random ops; none here
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(STEPS):
        loss = loss_fn(model(xs[step]), ts[step])
        opt.zero_grad()
        loss.backward()
        opt.step()


def test_ddp_two_processes_equal_one_process_on_the_full_batch(tmp_path):
    states = train_ddp("test_ddp_sort_quant", WORLD, tmp_path)

    single = make_model()
    before = {k: v.clone() for k, v in single.state_dict().items()}
    xs, ts = data()
    train(single, xs, ts)
    want = single.state_dict()
    assert_same_parameters(states, want)
    # The quantization parameters were really trained (their gradients were all-reduced).
    for name in ("1.alpha", "3.scale"):
        assert not torch.equal(want[name], before[name]), f"{name} did not move"
