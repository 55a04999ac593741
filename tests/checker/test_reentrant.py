"""A reentrant checkpoint refuses torch.autograd.grad by design: checked through .backward()."""

from __future__ import annotations

import pytest
import torch

import gradsmith
from gradsmith.checker.reentrant import backward_when_refused, refused


def _refuse_grad() -> None:
    if not torch.autograd._is_checkpoint_valid():
        raise RuntimeError("When use_reentrant=True, torch.utils.checkpoint is incompatible"
                           " with .grad() or passing an `inputs` parameter to .backward().")


class Checkpoint(torch.autograd.Function):
    """Reduced reentrant checkpoint: forward without a graph, backward recomputes and calls
    .backward() on the recomputed graph (so it refuses torch.autograd.grad)."""

    scale = 1.0

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        with torch.no_grad():
            return torch.tanh(x * w)

    @staticmethod
    def backward(ctx, g):
        _refuse_grad()
        x, w = (t.detach().requires_grad_(True) for t in ctx.saved_tensors)
        with torch.enable_grad():
            y = torch.tanh(x * w)
        torch.autograd.backward(y, g)
        return x.grad * Checkpoint.scale, w.grad


class WrongCheckpoint(Checkpoint):
    scale = 2.0

    @staticmethod
    def backward(ctx, g):
        gx, gw = Checkpoint.backward(ctx, g)
        return gx * 2.0, gw


def _inputs():
    gen = torch.Generator().manual_seed(0)
    return (torch.randn(3, 4, generator=gen, dtype=torch.float64, requires_grad=True),
            torch.randn(3, 4, generator=gen, dtype=torch.float64, requires_grad=True))


def test_refusal_is_recognised():
    x, w = _inputs()
    with pytest.raises(RuntimeError) as info:
        torch.autograd.grad(Checkpoint.apply(x, w).sum(), [x])
    assert refused(info.value)
    assert not refused(RuntimeError("mat1 and mat2 shapes cannot be multiplied"))


def test_gradients_through_backward_match_autograd_and_leave_grads_alone():
    x, w = _inputs()
    x.grad = torch.full_like(x, 5.0)  # the user's accumulated gradient must survive
    v = torch.randn(3, 4, dtype=torch.float64)
    with backward_when_refused():
        gx, gw = torch.autograd.grad(Checkpoint.apply(x, w), [x, w], v)
    want = torch.autograd.grad(torch.tanh(x * w), [x, w], v)
    torch.testing.assert_close(gx, want[0])
    torch.testing.assert_close(gw, want[1])
    assert torch.equal(x.grad, torch.full_like(x, 5.0)) and w.grad is None
    assert torch.autograd.grad.__module__.startswith("torch")  # restored on exit


def test_unrelated_errors_and_unused_inputs_keep_torch_behaviour():
    x, w = _inputs()
    other = torch.zeros(2, dtype=torch.float64, requires_grad=True)
    with backward_when_refused():
        with pytest.raises(RuntimeError, match="not have been used"):
            torch.autograd.grad(Checkpoint.apply(x, w).sum(), [x, other])
        gx, none = torch.autograd.grad(Checkpoint.apply(x, w).sum(), [x, other],
                                       allow_unused=True)
    assert none is None and gx.shape == x.shape


def test_checked_function_passes_and_planted_wrong_backward_fails():
    assert gradsmith.check(Checkpoint, *_inputs()).passed
    report = gradsmith.check(WrongCheckpoint, *_inputs())
    assert not report.passed
    assert any(f.code == "gradient-mismatch" for f in report.findings)
    assert not any(f.code == "backward-error" for f in report.findings)


def test_refusal_inside_a_users_backward_stays_an_error():
    """A backward that itself calls torch.autograd.grad through a reentrant checkpoint fails
    under .backward() too: the fallback does not hide it."""

    class Nested(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            leaf = x.detach().requires_grad_(True)
            w = torch.ones_like(leaf, requires_grad=True)
            with torch.enable_grad():
                (gx,) = torch.autograd.grad(Checkpoint.apply(leaf, w), [leaf], g)
            return gx

    x, _ = _inputs()
    with backward_when_refused(), pytest.raises(RuntimeError) as info:
        torch.autograd.grad(Nested.apply(x), [x], torch.ones_like(x))
    assert refused(info.value)
