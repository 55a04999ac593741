"""A gradient read only as a mask (fixtures/dev9_masked_grad.py, CPU): GS237 where the
result is wrong for a weighted loss, nothing where the gradient scales it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gradsmith.linter import lint

FIXTURE = Path(__file__).parent / "fixtures" / "dev9_masked_grad.py"


@pytest.fixture(scope="module")
def mod(load_fixture):
    return load_fixture(FIXTURE, "dev9_masked_grad_fixture")


@pytest.fixture(scope="module")
def found():
    return {(f.line, f.code) for f in lint(FIXTURE, config=False)}


def _inputs():
    torch.manual_seed(0)
    x = torch.randn(5, dtype=torch.float64, requires_grad=True)
    y = torch.randn(5, dtype=torch.float64, requires_grad=True)
    return x, y


def _weighted_grads(fn, x, y):
    """Gradients of `3 * fn(x, y).sum()`: the incoming gradient is 3, not 1."""
    return torch.autograd.grad((3.0 * fn(x, y)).sum(), (x, y))


def test_mask_only_gradient_is_wrong_for_a_weighted_loss_and_reported(mod, found):
    x, y = _inputs()
    want = _weighted_grads(torch.logaddexp, x, y)
    got = _weighted_grads(mod.MaskedLogAddExp.apply, x, y)
    torch.testing.assert_close(got[0] * 3.0, want[0])  # off by exactly the weight
    assert not torch.allclose(got[0], want[0])
    line = FIXTURE.read_text().splitlines().index("    def backward(ctx, g):  # GS237") + 1
    assert (line, "GS237") in found


def test_scaled_twin_is_right_and_silent(mod, found):
    x, y = _inputs()
    want = _weighted_grads(torch.logaddexp, x, y)
    got = _weighted_grads(mod.ScaledLogAddExp.apply, x, y)
    torch.testing.assert_close(got, want)
    assert [code for _, code in found] == ["GS237"]
