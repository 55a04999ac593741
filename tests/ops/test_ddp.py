"""Training under DistributedDataParallel (2 processes, gloo, CPU) equals one process, dropout
included.

The model uses gradsmith's Attention (with attention dropout) inside a CheckpointedSequential.
Every process seeds the global RNG identically before each step, so all draw the same dropout
seed; rank r sets ``dropout_batch_offset`` to the index of its first sample, so its masks are the
ones the single process draws for those samples. DDP averages the two half-batch gradients, which
equals the full-batch gradient of a mean loss.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch import nn

from gradsmith.ops._attention import Attention
from gradsmith.ops._checkpoint import CheckpointedSequential

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ddp_harness import assert_same_parameters, train_ddp  # noqa: E402

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


def test_ddp_two_processes_equal_one_process_on_the_full_batch(tmp_path):
    states = train_ddp("test_ddp", WORLD, tmp_path)

    single = make_model()
    xs, ys = data()
    train(single, xs, ys)
    want = single.state_dict()
    before = make_model().state_dict()
    assert_same_parameters(states, want)
    assert any(not torch.equal(want[n], before[n]) for n in want), "training changed nothing"


def test_dropout_is_active_so_the_equality_above_covers_it():
    model = make_model()
    x = data()[0][0]
    torch.manual_seed(7)
    a = model(x)
    torch.manual_seed(8)
    b = model(x)
    assert not torch.allclose(a, b)
