"""GS243 (fixtures/frozen_params.py, CPU): an adjoint-style backward that differentiates
every parameter of the module raises once one parameter is frozen; the twin that takes only
the trainable ones is right (autograd of ``2 * net(x)`` is the reference) and silent."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gradsmith.linter import lint

FIXTURE = Path(__file__).parent / "fixtures" / "frozen_params.py"


@pytest.fixture(scope="module")
def mod(load_fixture):
    return load_fixture(FIXTURE, "frozen_params_fixture")


def _net_and_x():
    torch.manual_seed(0)
    net = torch.nn.Linear(4, 3).double()
    x = torch.randn(5, 4, dtype=torch.float64, requires_grad=True)
    return net, x


def _flat(net):
    return torch.cat([p.detach().flatten() for p in net.parameters()]).requires_grad_()


def test_all_trainable_both_are_right(mod):
    net, x = _net_and_x()
    for make in (mod.make_scaled, mod.make_scaled_trainable_only):
        flat = _flat(net)
        dflat, dx = torch.autograd.grad(make(net).apply(flat, x).sum(), (flat, x))
        want = torch.autograd.grad((2 * net(x)).sum(), (x, *net.parameters()))
        torch.testing.assert_close(dx, want[0])
        torch.testing.assert_close(dflat, torch.cat([g.flatten() for g in want[1:]]))


def test_a_frozen_parameter_makes_backward_raise(mod):
    net, x = _net_and_x()
    net.weight.requires_grad_(False)
    flat = _flat(net)
    with pytest.raises(RuntimeError, match="does not require grad"):
        mod.make_scaled(net).apply(flat, x).sum().backward()
    dflat, dx = torch.autograd.grad(mod.make_scaled_trainable_only(net).apply(flat, x).sum(),
                                    (flat, x))
    torch.testing.assert_close(dx, torch.autograd.grad((2 * net(x)).sum(), x)[0])
    bias = torch.full((3,), 2.0 * 5, dtype=torch.float64)  # by hand: 2 per row, 5 rows
    torch.testing.assert_close(dflat, torch.cat([torch.zeros(12, dtype=torch.float64), bias]))


def test_gs243_reports_the_unfiltered_call_only():
    found = [(f.code, f.severity, f.line) for f in lint(FIXTURE, config=False)
             if f.code == "GS243"]
    assert found == [("GS243", "warning", 25)]
