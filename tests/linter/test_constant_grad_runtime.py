"""GS237 for an input's constant gradient (issue 19, lint corpus 6: an auxiliary loss added
through an identity, `grad_loss = torch.ones(1)`): weighting the total loss scales every
other gradient but not that one, against autograd of the same sum written in torch."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gradsmith.linter import lint

FIXTURE = Path(__file__).parent / "fixtures" / "constant_grad.py"


@pytest.fixture(scope="module")
def mod(load_fixture):
    return load_fixture(FIXTURE, "constant_grad_fixture")


def test_lint_reports_the_constant_gradients_only():
    found = sorted((f.line, f.code) for f in lint(FIXTURE, config=False) if f.code == "GS237")
    marked = sorted((i, "GS237") for i, text in enumerate(FIXTURE.read_text().splitlines(), 1)
                    if "# GS237" in text)
    assert found == marked and len(marked) == 2


@pytest.mark.parametrize("name", ["AddAux", "AddAuxInline"])
def test_constant_gradient_ignores_a_loss_weight(mod, name):
    torch.manual_seed(0)
    x = torch.randn(4, dtype=torch.float64, requires_grad=True)
    w = torch.randn(4, dtype=torch.float64)
    aux = (x.detach() ** 2).sum().requires_grad_()
    weight = 0.25  # a loss weight, a mean over 4 micro-batches, an unscaled GradScaler
    (weight * (getattr(mod, name).apply(x, aux) * w).sum()).backward()
    # the same total written in torch: the aux loss joins the sum, so it is weighted too
    x2, aux2 = x.detach().clone().requires_grad_(), aux.detach().clone().requires_grad_()
    (weight * ((x2 * w).sum() + aux2)).backward()
    torch.testing.assert_close(x.grad, x2.grad)  # the identity's gradient is right
    assert aux2.grad.item() == weight
    assert aux.grad.item() == 1.0  # the constant: the weight is silently lost


def test_near_misses_match_autograd(mod):
    torch.manual_seed(0)
    x = torch.randn(4, dtype=torch.float64, requires_grad=True)
    aux = torch.tensor(3.0, dtype=torch.float64, requires_grad=True)
    (0.25 * mod.ScaledAux.apply(x, aux).sum()).backward()
    torch.testing.assert_close(aux.grad, torch.tensor(0.25, dtype=torch.float64))
    u = torch.randn(4, dtype=torch.float64, requires_grad=True)
    (mod.ZeroForUnused.apply(x, u).sum()).backward()
    torch.testing.assert_close(u.grad, torch.zeros(4, dtype=torch.float64))
