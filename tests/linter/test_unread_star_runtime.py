"""GS122's unnamed shapes at run time (fixtures/unread_star.py, CPU): a loss on the output a
``*args`` or ``_`` drops gets a silently missing gradient (autograd of the same expression
written with torch's own functions is the reference); the near misses give no finding."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gradsmith.linter import lint

FIXTURE = Path(__file__).parent / "fixtures" / "unread_star.py"


@pytest.fixture(scope="module")
def mod(load_fixture):
    return load_fixture(FIXTURE, "unread_star_fixture")


def _x():
    torch.manual_seed(0)
    return torch.randn(2, 3, dtype=torch.float64, requires_grad=True)


def _grad(loss, x):
    return torch.autograd.grad(loss, x)[0]


def test_dropped_outputs_lose_their_gradient(mod):
    x = _x()
    _, lse = mod.WithLse.apply(x, True)
    assert lse.requires_grad  # looks differentiable
    assert not torch.allclose(_grad(lse.sum(), x), _grad(torch.logsumexp(x, -1).sum(), x))
    _, mean = mod.VarMean.apply(x)
    assert not torch.allclose(_grad(mean.sum(), x), _grad(x.mean(-1).sum(), x))
    _, total = mod.NamedUnderscore.apply(x)
    assert not torch.allclose(_grad(total * 1.0, x), _grad(x.sum(), x))
    var, _ = mod.VarMean.apply(x)
    torch.testing.assert_close(_grad(var.sum(), x), _grad(x.var(-1).sum(), x))  # the rest is right


def test_findings_are_the_dropping_functions_only():
    lines = FIXTURE.read_text().splitlines()
    owner, owners = None, {}
    for number, line in enumerate(lines, 1):
        if line.startswith("class "):
            owner = line.split()[1].split("(")[0]
        owners[number] = owner
    found = {(owners[f.line], f.severity) for f in lint(FIXTURE, config=False) if f.code == "GS122"}
    assert found == {("WithLse", "warning"), ("VarMean", "warning"), ("NamedUnderscore", "warning")}
