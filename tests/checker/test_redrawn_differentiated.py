"""A checked declaration line must hold for the differentiated tensors it prints as
``torch.randn`` drawn afresh, of either sign (round 13 task q, reduced from a spiking network's
per-tensor weight quantiser): with the check's step drawn negative, forward clamps it to eps,
every weight is clipped, and a binary learned-scale surrogate fits backward there; pasted, the
line draws a positive step about half the time, and then it FAILs. Such a line is printed
unchecked. A line fitted where it holds at any draw keeps its check."""

from __future__ import annotations

import torch

import gradsmith


class StepQuant(torch.autograd.Function):
    """Ternary LSQ-style quantiser: round(clamp(w / s, -1, 1)) * s, s clamped above eps."""

    @staticmethod
    def forward(ctx, w, s):
        s = torch.where(s > 1e-5, s, torch.full_like(s, 1e-5))
        div = w / s
        q = torch.round(div.clamp(-1, 1))
        ctx.save_for_backward(div, q, s)
        return q * s

    @staticmethod
    def backward(ctx, g):
        div, q, s = ctx.saved_tensors
        inside = (div.abs() <= 1).to(g.dtype)
        scale = 1.0 / div.numel() ** 0.5
        grad_s = (g * ((q - div) * inside + (1 - inside) * torch.sign(div)) * scale).sum()
        return g * inside, grad_s.reshape(s.shape)


def _estimator(report):
    (found,) = [f for f in report.errors if f.code == "undeclared-estimator"]
    return found


def _apply(line: str, s_value: float):
    factory, kwargs = eval(  # noqa: S307 - the line gradsmith printed
        line.lstrip("@").replace("gradsmith.example(", "(lambda f, **k: (f, k))(", 1),
        {"torch": torch, "StepQuant": StepQuant})
    w, _ = factory()[:2]
    s = torch.full((1, 1), s_value, dtype=torch.float64, requires_grad=True)
    return gradsmith.check(StepQuant, w, s, compat=False, **kwargs)


def test_a_line_fitted_at_a_negative_step_is_not_called_checked():
    gen = torch.Generator().manual_seed(0)
    w = torch.randn(3, 4, dtype=torch.float64, generator=gen).requires_grad_()
    s = torch.full((1, 1), -0.7, dtype=torch.float64, requires_grad=True)
    report = gradsmith.check(StepQuant, w, s, compat=False)
    found = _estimator(report)
    line = found.details["declaration"]
    assert "torch.randn(1, 1" in line, line
    assert not found.details["verified"], line
    if "surrogate=lambda w, s: ..." not in line:
        # Independent reference: the printed line, applied with a positive step, fails.
        assert not _apply(line, 0.7).passed


def test_the_backward_is_the_lsq_rule_at_a_positive_step():
    # what the Function computes, by an equivalent expression's autograd: the straight-through
    # surrogate with LSQ's gradient scale (so the reduced case is the estimator it claims)
    gen = torch.Generator().manual_seed(1)
    w = torch.randn(3, 4, dtype=torch.float64, generator=gen).requires_grad_()
    s = torch.full((1, 1), 0.7, dtype=torch.float64, requires_grad=True)
    g = torch.randn(3, 4, dtype=torch.float64, generator=gen)
    got = torch.autograd.grad(StepQuant.apply(w, s), (w, s), g)
    scale = 1 / 12 ** 0.5
    ss = s * scale + (s - s * scale).detach()
    div = w / ss
    t = div.clamp(-1, 1)
    want = torch.autograd.grad((t + (torch.round(t) - t).detach()) * ss, (w, s), g)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)
