"""A step size forward keeps above a small constant (``eps = torch.tensor(1e-5)``, then
``s = torch.where(s > eps, s, eps)``) is synthesised positive (round 13 task q, reduced from a
spiking network's quantisers): drawn negative, it was clamped to eps, every element was
clipped, the in-range branch of backward was never exercised, and a surrogate fitted to that
degenerate point was printed as checked. On the positive step, the true surrogate passes and a
planted wrong in-range step gradient FAILs against it."""

from __future__ import annotations

import torch

import gradsmith
from gradsmith.discovery.synthesize import Synthesized, synthesize


class FlooredStep(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, s):
        eps = torch.tensor(0.00001).float().to(s.device)
        s = torch.where(s > eps, s, eps)
        div = x / s
        ctx.save_for_backward(div, s)
        return torch.round(div.clamp(-2, 2)) * s

    @staticmethod
    def backward(ctx, g):
        div, s = ctx.saved_tensors
        inside = (div.abs() <= 2).to(g.dtype)
        q = torch.round(div.clamp(-2, 2))
        grad_s = (g * ((q - div) * inside + (1 - inside) * q)).sum()
        return g * inside, grad_s.reshape(s.shape)


class FlooredStepWrong(FlooredStep):  # planted: the in-range term's sign flipped
    @staticmethod
    def backward(ctx, g):
        div, s = ctx.saved_tensors
        inside = (div.abs() <= 2).to(g.dtype)
        q = torch.round(div.clamp(-2, 2))
        grad_s = (g * ((div - q) * inside + (1 - inside) * q)).sum()
        return g * inside, grad_s.reshape(s.shape)


def _found(fn) -> Synthesized:
    found = synthesize(fn)
    assert isinstance(found, Synthesized), found
    return found


def test_the_floored_step_is_synthesised_positive_and_backward_is_exercised_in_range():
    found = _found(FlooredStep)
    x, s = found.args[:2]
    assert bool((s > 1e-5).all()), found.description
    assert "in (1e-05, inf)" in found.description
    # in range somewhere: the branch the degenerate draw never reached
    assert bool(((x / s).abs() <= 2).any())
    # Independent reference: backward is autograd of the straight-through surrogate
    xx, ss = x.detach().clone().requires_grad_(), s.detach().clone().requires_grad_()
    g = torch.randn(x.shape, dtype=x.dtype)
    t = (xx / ss).clamp(-2, 2)
    want = torch.autograd.grad((t + (torch.round(t) - t).detach()) * ss, (xx, ss), g)
    got = torch.autograd.grad(FlooredStep.apply(xx, ss), (xx, ss), g)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)


def _surrogate(x, s):
    s = torch.where(s > 1e-5, s, torch.full_like(s, 1e-5))
    t = (x / s).clamp(-2, 2)
    return (t + (torch.round(t) - t).detach()) * s


def test_a_planted_wrong_in_range_step_gradient_fails_against_the_true_surrogate():
    found = _found(FlooredStepWrong)
    args = found.args
    assert gradsmith.check(FlooredStep, *args, surrogate=_surrogate, compat=False).passed
    wrong = gradsmith.check(FlooredStepWrong, *args, surrogate=_surrogate, compat=False)
    assert "surrogate-mismatch" in wrong.codes("error"), wrong.codes("error")
