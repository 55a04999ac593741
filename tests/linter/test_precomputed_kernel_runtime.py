"""GS222 where a custom op fills the gradient in forward (fixtures/precomputed_kernel.py,
CPU): the first derivative is right, the second is silently missing (autograd of
``(x * x).sum(-1)`` is the reference)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gradsmith.linter import lint

FIXTURE = Path(__file__).parent / "fixtures" / "precomputed_kernel.py"


@pytest.fixture(scope="module")
def mod(load_fixture):
    return load_fixture(FIXTURE, "precomputed_kernel_fixture")


def test_gradient_from_the_forward_kernel_has_no_second_derivative(mod):
    torch.manual_seed(0)
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    w = torch.randn(3, dtype=torch.float64, requires_grad=True)
    (got,) = torch.autograd.grad((mod.SquareRows.apply(x, "sum") * w).sum(), x, create_graph=True)
    (want,) = torch.autograd.grad(((x * x).sum(-1) * w).sum(), x, create_graph=True)
    torch.testing.assert_close(got, want)
    second = torch.autograd.grad(got.sum(), x, allow_unused=True)[0]
    assert second is None  # the x -> gradient dependence is gone
    torch.testing.assert_close(torch.autograd.grad(want.sum(), x)[0], 2 * w.detach()[:, None]
                               .expand(3, 4))  # what it should be, by hand
    found = [(f.code, f.severity) for f in lint(FIXTURE, config=False) if f.code == "GS222"
             and f.line < 30]
    assert found == [("GS222", "warning")]


def test_gradient_kept_by_a_saving_helper_is_precomputed_too(mod):
    """``_save_if_needed(ctx, x_grad)`` saves like ``ctx.save_for_backward(x_grad)``: the kernel-filled
    gradient scaled in place in backward still has no second derivative, and GS222 says so."""
    torch.manual_seed(0)
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    w = torch.randn(3, dtype=torch.float64, requires_grad=True)
    out = mod.SquareRowsSavedByHelper.apply(x)
    (got,) = torch.autograd.grad((out * w).sum(), x, create_graph=True)
    torch.testing.assert_close(got, 2 * x.detach() * w.detach()[:, None])  # by hand
    assert torch.autograd.grad(got.sum(), x, allow_unused=True)[0] is None  # silently missing
    found = [(f.code, f.severity, f.line) for f in lint(FIXTURE, config=False)
             if f.code == "GS222" and f.line > 30]
    assert found == [("GS222", "warning", 53)]
