"""Part-1 Modules: repr like the constructor, same result as the function, parameters train."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import gradsmith.functional as G
import gradsmith.nn as N


@pytest.mark.parametrize(("module", "text"), [
    (N.ClippedReLU(), "ClippedReLU(clip_val=6.0)"),
    (N.ClippedReLU(clip_val=1), "ClippedReLU(clip_val=1.0)"),
    (N.Swish(), "Swish(beta=1.0, learnable=True)"),
    (N.Swish(beta=2.0, learnable=False), "Swish(beta=2.0, learnable=False)"),
    (N.SoftRound(), "SoftRound(alpha=5.0)"),
    (N.SoftThreshold(0.5), "SoftThreshold(threshold=0.5, learnable=False)"),
    (N.GumbelSoftmax(), "GumbelSoftmax(tau=1.0, hard=False, dim=-1)"),
    (N.GradientReversal(), "GradientReversal(alpha=1.0)"),
    (N.GradientReversal(alpha=G.dann_schedule), "GradientReversal(alpha=dann_schedule)"),
    (N.FusedLinearReLU(3, 4, bias=False), "FusedLinearReLU(in_features=3, out_features=4, "
                                          "bias=False)"),
])
def test_repr_reads_like_the_constructor(module, text):
    assert repr(module) == text


@pytest.mark.parametrize(("module", "reference"), [
    (N.ClippedReLU(2.0), lambda x: torch.clamp(x, 0, 2.0)),
    (N.Swish(beta=1.5, learnable=False), lambda x: x * torch.sigmoid(1.5 * x)),
    (N.SoftThreshold(0.3), lambda x: torch.sign(x) * torch.relu(x.abs() - 0.3)),
    (N.SoftRound(alpha=3.0), lambda x: G.soft_round(x, 3.0)),
], ids=lambda v: type(v).__name__ if isinstance(v, nn.Module) else "")
def test_module_matches_function(module, reference):
    x = torch.randn(6, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    torch.testing.assert_close(module(x), reference(x))


@pytest.mark.parametrize(("module", "param", "reference"), [
    (N.Swish(beta=0.7), "beta", lambda x, b: x * torch.sigmoid(b * x)),
    (N.SoftThreshold(0.4, learnable=True), "threshold",
     lambda x, t: torch.sign(x) * torch.relu(x.abs() - t)),
], ids=["Swish", "SoftThreshold"])
def test_learnable_parameter_gets_the_reference_gradient(module, param, reference):
    module = module.double()
    x = torch.randn(5, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    p = getattr(module, param)
    assert isinstance(p, nn.Parameter)
    (g,) = torch.autograd.grad(module(x).pow(2).sum(), p)
    q = p.detach().clone().requires_grad_()
    (expected,) = torch.autograd.grad(reference(x, q).pow(2).sum(), q)
    torch.testing.assert_close(g, expected)
    assert g.abs().item() > 0


def test_swish_not_learnable_has_no_parameters():
    assert list(N.Swish(learnable=False).parameters()) == []


def test_gradient_reversal_fixed_and_scheduled():
    x = torch.ones(3, requires_grad=True)
    (g,) = torch.autograd.grad(N.GradientReversal(alpha=0.3)(x).sum(), x)
    torch.testing.assert_close(g, torch.full((3,), -0.3))
    layer = N.GradientReversal(alpha=G.dann_schedule)
    grads = []
    for p in (0.0, 0.25, 1.0):
        layer.set_progress(p)
        (g,) = torch.autograd.grad(layer(x).sum(), x)
        grads.append(g[0].item())
        expected = -(2.0 / (1.0 + torch.exp(torch.tensor(-10.0 * p))) - 1.0)
        assert g[0].item() == pytest.approx(expected.item(), abs=1e-6)
    assert grads[0] == 0.0 and grads[1] > grads[2]


def test_fused_linear_relu_is_a_drop_in_for_linear_relu():
    torch.manual_seed(0)
    linear = nn.Linear(4, 3).double()
    fused = N.FusedLinearReLU(4, 3).double()
    fused.load_state_dict(linear.state_dict())
    x = torch.randn(5, 4, dtype=torch.float64)
    ref = nn.Sequential(linear, nn.ReLU())
    torch.testing.assert_close(fused(x), ref(x))
    fused(x).sum().backward()
    ref(x).sum().backward()
    for a, b in zip(fused.parameters(), linear.parameters()):
        torch.testing.assert_close(a.grad, b.grad)


def test_gumbel_softmax_module_uses_generator():
    m = N.GumbelSoftmax(tau=0.5, hard=True)
    logits = torch.randn(4, 6)
    a = m(logits, torch.Generator().manual_seed(3))
    b = m(logits, torch.Generator().manual_seed(3))
    torch.testing.assert_close(a, b)
    torch.testing.assert_close(a.sum(-1), torch.ones(4))
