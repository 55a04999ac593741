"""GS240 on tensors forward saves only when an input needs a gradient
(fixtures/saved_if_needed.py, CPU): backward reads them unconditionally and raises when one
input is frozen; the guarded twin is silent and right (``x @ w.t()`` by autograd is the
reference)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gradsmith.linter import lint

FIXTURE = Path(__file__).parent / "fixtures" / "saved_if_needed.py"


@pytest.fixture(scope="module")
def mod(load_fixture):
    return load_fixture(FIXTURE, "saved_if_needed_fixture")


def _inputs(x_grad: bool, w_grad: bool):
    torch.manual_seed(0)
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=x_grad)
    w = torch.randn(5, 4, dtype=torch.float64, requires_grad=w_grad)
    return x, w


@pytest.mark.parametrize("x_grad, w_grad", [(True, False), (False, True)])
def test_a_frozen_input_makes_backward_read_none(mod, x_grad, w_grad):
    x, w = _inputs(x_grad, w_grad)
    with pytest.raises(AttributeError, match="NoneType"):
        mod.LinearSavedIfNeeded.apply(x, w).sum().backward()
    x, w = _inputs(x_grad, w_grad)
    out = mod.LinearSavedIfNeededGuarded.apply(x, w)
    want = torch.autograd.grad((x @ w.t()).sum(), [t for t in (x, w) if t.requires_grad])
    got = torch.autograd.grad(out.sum(), [t for t in (x, w) if t.requires_grad])
    torch.testing.assert_close(got, want)


def test_gs240_names_the_saves_and_not_the_guarded_twin(mod):
    x, w = _inputs(True, True)  # when both need a gradient the unguarded one is right
    torch.testing.assert_close(torch.autograd.grad(mod.LinearSavedIfNeeded.apply(x, w).sum(),
                                                   (x, w)),
                               torch.autograd.grad((x @ w.t()).sum(), (x, w)))
    found = sorted((f.line, f.severity) for f in lint(FIXTURE, config=False)
                   if f.code == "GS240" and f.line < 50)
    assert found == [(25, "warning"), (26, "warning")]


def test_forward_scaling_a_gradient_computed_only_when_wanted(mod):
    """``dx = 2 * x if wanted else None`` then ``dx /= n``: right when x needs a gradient,
    TypeError on an input that requires no grad (inference on frozen weights); GS240 names the line."""
    torch.manual_seed(0)
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    (got,) = torch.autograd.grad(mod.MeanSquareGradInForward.apply(x, "mean"), x)
    (want,) = torch.autograd.grad((x * x).mean(), x)
    torch.testing.assert_close(got, want)
    with pytest.raises(TypeError, match="NoneType"):
        mod.MeanSquareGradInForward.apply(x.detach(), "mean")
    found = [(f.line, f.severity) for f in lint(FIXTURE, config=False)
             if f.code == "GS240" and f.line > 50]
    assert found == [(67, "warning")]
    assert "`dx /=` on None (TypeError)" in next(f.message for f in lint(FIXTURE, config=False) if f.line == 67)
