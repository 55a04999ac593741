"""GS250/GS251 (fixtures/dropped_grad.py, CPU): each reported input never gets a gradient
through the Function while plain autograd of the same computation gives it one; the twins
the rules leave alone are correct (or pass the input detached, on purpose)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gradsmith.linter import lint

FIXTURE = Path(__file__).parent / "fixtures" / "dropped_grad.py"


@pytest.fixture(scope="module")
def mod(load_fixture):
    return load_fixture(FIXTURE, "dropped_grad_fixture")


def _marked(code: str) -> list[int]:
    return [n for n, text in enumerate(FIXTURE.read_text().splitlines(), 1)
            if text.endswith(f"# {code}")]


def test_findings_are_exactly_the_marked_lines():
    found = [(f.code, f.severity, f.line) for f in lint(FIXTURE, config=False)]
    assert found == [("GS251", "warning", _marked("GS251")[0]),
                     ("GS250", "error", _marked("GS250")[0])]


def test_parameter_passed_never_gets_a_gradient(mod):
    """GS250: the call passes an nn.Parameter; autograd of `x * 2 + pos` trains it."""
    torch.manual_seed(0)
    net = mod.Embed(4)
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    w = torch.randn(3, 4, dtype=torch.float64)
    (net(x) * w).sum().backward()
    assert net.pos.grad is None
    pos = net.pos.detach().clone().requires_grad_()
    (((x * 2.0 + pos) * w).sum()).backward()
    torch.testing.assert_close(pos.grad, w.sum(0))  # hand: d/dpos = sum over rows of w
    assert pos.grad.abs().sum() > 0


def test_computed_embedding_never_trains_its_module(mod):
    """GS251: the positional MLP that computes `pos` gets no gradient through RevBlocks;
    the input's gradient is right, so only the dropped slot is wrong."""
    torch.manual_seed(0)
    net = mod.RevNet(4)
    x = torch.randn(2, 4, dtype=torch.float64, requires_grad=True)
    c = torch.randn(2, 3, dtype=torch.float64)
    net(x, c).sum().backward()
    got_x = x.grad.clone()
    assert net.pos_mlp.weight.grad is None
    x.grad = None
    pos = net.pos_mlp(c)
    out = x * 0.5
    for block in net.blocks:
        out = block(out, pos)
    out.sum().backward()
    torch.testing.assert_close(got_x, x.grad)
    assert net.pos_mlp.weight.grad.abs().sum() > 0


def test_silent_twins_are_right(mod):
    torch.manual_seed(0)
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    net = mod.EmbedRight(4)
    net(x).sum().backward()
    torch.testing.assert_close(net.pos.grad, torch.full((4,), 3.0, dtype=torch.float64))
    rows = torch.tensor([2, 0, 2])
    torch.testing.assert_close(
        torch.autograd.grad(mod.PickRows.apply(x, rows).sum(), x)[0],
        torch.autograd.grad((x.index_select(0, rows) * 3.0).sum(), x)[0])
    v = torch.randn(4, dtype=torch.float64, requires_grad=True)
    ref = torch.zeros(3, 4, dtype=torch.float64)
    torch.testing.assert_close(torch.autograd.grad(mod.LikeShape.apply(v, ref).sum(), v)[0],
                               torch.autograd.grad((v.expand(3, 4) * 2.0).sum(), v)[0])


def test_frozen_base_twin_is_right(mod):
    """The LoRA-style twin left alone: the adapter's and the input's gradients match
    autograd of the same expression with the base weight frozen."""
    torch.manual_seed(0)
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    w = torch.randn(5, 4, dtype=torch.float64)
    a = torch.randn(5, 4, dtype=torch.float64, requires_grad=True)
    out = mod.FrozenBaseAct.apply(x, w, a, torch.tanh,
                                  lambda h, g: g * (1 - torch.tanh(h) ** 2))
    got = torch.autograd.grad(out.sum(), (x, a))
    want = torch.autograd.grad(torch.tanh(x @ w.t() + x @ a.t()).sum(), (x, a))
    torch.testing.assert_close(got, want)
