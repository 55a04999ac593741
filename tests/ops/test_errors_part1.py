"""Every bad-input path of the part-1 ops raises a GradsmithError naming argument and value."""

from __future__ import annotations

import pytest
import torch

import gradsmith.functional as G
import gradsmith.nn as N
from gradsmith import GradsmithError

X = torch.randn(3, 4)
XI = torch.arange(12).reshape(3, 4)


def _w(*shape: int) -> torch.Tensor:
    return torch.randn(*shape)


FUNCTION_CASES = [
    # integer / non-tensor inputs, for every op
    ("clipped_relu-int", lambda: G.clipped_relu(XI), r"clipped_relu: x must be a floating.*int64"),
    ("swish-int", lambda: G.swish(XI), r"swish: x must be a floating.*int64"),
    ("scaled_sigmoid-int", lambda: G.scaled_sigmoid(XI), r"scaled_sigmoid: x must be a floating"),
    ("soft_round-int", lambda: G.soft_round(XI), r"soft_round: x must be a floating"),
    ("soft_threshold-int", lambda: G.soft_threshold(XI, 0.1), r"soft_threshold: x must be a "),
    ("sign_ste-int", lambda: G.sign_ste(XI), r"sign_ste: x must be a floating"),
    ("round_ste-int", lambda: G.round_ste(XI), r"round_ste: x must be a floating"),
    ("gumbel-int", lambda: G.gumbel_softmax(XI), r"gumbel_softmax: logits must be a floating"),
    ("grad_scale-int", lambda: G.grad_scale(XI, 0.5), r"grad_scale: x must be a floating"),
    ("grad_reverse-int", lambda: G.grad_reverse(XI), r"grad_reverse: x must be a floating"),
    ("linear-int-x", lambda: G.fused_linear_relu(XI, _w(2, 4)),
     r"fused_linear_relu: x must be a floating"),
    ("linear-int-w", lambda: G.fused_linear_relu(X, torch.ones(2, 4, dtype=torch.int32)),
     r"fused_linear_relu: weight must be a floating.*int32"),
    ("add_relu-int-y", lambda: G.fused_add_relu(X, XI), r"fused_add_relu: y must be a floating"),
    ("logsumexp-int", lambda: G.logsumexp(XI, 0), r"logsumexp: x must be a floating"),
    # hyper-parameters
    ("clip_val-zero", lambda: G.clipped_relu(X, 0.0), r"clipped_relu: clip_val must be > 0, got 0.0"),
    ("clip_val-neg", lambda: G.clipped_relu(X, -1.0), r"clip_val must be > 0, got -1.0"),
    ("clip_val-nan", lambda: G.clipped_relu(X, float("nan")), r"clip_val must be finite, got nan"),
    ("clip_val-str", lambda: G.clipped_relu(X, "6"), r"clip_val must be a real number, got str"),
    ("beta-inf", lambda: G.swish(X, float("inf")), r"swish: beta must be finite, got inf"),
    ("beta-int-tensor", lambda: G.swish(X, torch.ones(4, dtype=torch.int64)),
     r"swish: beta must be a floating-point tensor"),
    ("beta-bad-shape", lambda: G.swish(X, torch.ones(5)),
     r"swish: beta of shape \(5,\) must broadcast to x's shape \(3, 4\)"),
    ("beta-enlarges", lambda: G.swish(X, torch.ones(2, 3, 4)),
     r"beta of shape \(2, 3, 4\) must broadcast to x's shape \(3, 4\) without enlarging"),
    ("scale-zero", lambda: G.scaled_sigmoid(X, 0.0), r"scaled_sigmoid: scale must be non-zero"),
    ("alpha-zero", lambda: G.soft_round(X, 0.0), r"soft_round: alpha must be > 0, got 0.0"),
    ("alpha-neg", lambda: G.soft_round(X, -2), r"soft_round: alpha must be > 0, got -2.0"),
    ("threshold-neg", lambda: G.soft_threshold(X, -0.1),
     r"soft_threshold: threshold must be >= 0, got -0.1"),
    ("threshold-bad-shape", lambda: G.soft_threshold(X, torch.ones(3)),
     r"soft_threshold: threshold of shape \(3,\)"),
    ("clip-zero", lambda: G.sign_ste(X, clip=0.0), r"sign_ste: clip must be > 0, got 0.0"),
    ("tau-zero", lambda: G.gumbel_softmax(X, tau=0.0), r"gumbel_softmax: tau must be > 0, got 0"),
    ("tau-neg", lambda: G.gumbel_softmax(X, tau=-1.0), r"tau must be > 0, got -1.0"),
    ("hard-str", lambda: G.gumbel_softmax(X, hard="yes"),
     r"gumbel_softmax: hard must be True or False, got str 'yes'"),
    ("gumbel-dim", lambda: G.gumbel_softmax(X, dim=2),
     r"gumbel_softmax: dim must be in \[-2, 1\] for a 2-d tensor, got 2"),
    ("gumbel-0d", lambda: G.gumbel_softmax(torch.tensor(1.0)),
     r"gumbel_softmax: logits must have at least 1 dimension"),
    ("gumbel-generator", lambda: G.gumbel_softmax(X, generator=0),
     r"gumbel_softmax: generator must be a torch.Generator or None, got int"),
    ("grad_scale-alpha", lambda: G.grad_scale(X, None), r"grad_scale: alpha must be a real number"),
    ("grad_reverse-neg", lambda: G.grad_reverse(X, -1.0),
     r"grad_reverse: alpha must be >= 0, got -1.0.*grad_scale\(x, 1.0\)"),
    ("dann-progress", lambda: G.dann_schedule(1.5), r"dann_schedule: progress must be in \[0, 1\]"),
    ("dann-gamma", lambda: G.dann_schedule(0.5, gamma=0), r"dann_schedule: gamma must be > 0"),
    # shapes and dims
    ("linear-in-features", lambda: G.fused_linear_relu(X, _w(2, 5)),
     r"x's last dimension must equal weight.shape\[1\] = 5.*got x of shape \(3, 4\)"),
    ("linear-weight-1d", lambda: G.fused_linear_relu(X, _w(4)), r"weight must be 2-d"),
    ("linear-bias-shape", lambda: G.fused_linear_relu(X, _w(2, 4), _w(3)),
     r"fused_linear_relu: bias must have shape \(2,\).*got \(3,\)"),
    ("linear-mixed-dtype", lambda: G.fused_linear_relu(X.double(), _w(2, 4)),
     r"x, weight and bias must share a dtype outside autocast"),
    ("add_relu-shapes", lambda: G.fused_add_relu(X, torch.randn(5)),
     r"fused_add_relu: x and y must have broadcastable shapes, got \(3, 4\) and \(5,\)"),
    ("logsumexp-dim-range", lambda: G.logsumexp(X, 2),
     r"logsumexp: dim must be in \[-2, 1\] for a 2-d tensor, got 2"),
    ("logsumexp-dim-type", lambda: G.logsumexp(X, 1.0), r"logsumexp: dim must be an int, got float"),
    ("logsumexp-dim-empty", lambda: G.logsumexp(X, ()), r"dim must be an int or a non-empty tuple"),
    ("logsumexp-dim-repeat", lambda: G.logsumexp(X, (1, -1)), r"dim must not repeat a dimension"),
    ("logsumexp-keepdim", lambda: G.logsumexp(X, 1, keepdim=1), r"keepdim must be True or False"),
]

MODULE_CASES = [
    ("ClippedReLU", lambda: N.ClippedReLU(clip_val=-6.0), r"ClippedReLU: clip_val must be > 0"),
    ("Swish-beta", lambda: N.Swish(beta="a"), r"Swish: beta must be a real number"),
    ("Swish-learnable", lambda: N.Swish(learnable="no"), r"Swish: learnable must be True or False"),
    ("SoftRound", lambda: N.SoftRound(alpha=0), r"SoftRound: alpha must be > 0, got 0.0"),
    ("SoftThreshold", lambda: N.SoftThreshold(-1.0), r"SoftThreshold: threshold must be >= 0"),
    ("GumbelSoftmax-tau", lambda: N.GumbelSoftmax(tau=0), r"GumbelSoftmax: tau must be > 0"),
    ("GumbelSoftmax-hard", lambda: N.GumbelSoftmax(hard=None), r"GumbelSoftmax: hard must be True"),
    ("GumbelSoftmax-dim", lambda: N.GumbelSoftmax(dim=1.5), r"GumbelSoftmax: dim must be an int"),
    ("GradientReversal", lambda: N.GradientReversal(alpha=-0.5),
     r"GradientReversal: alpha must be >= 0, got -0.5"),
    ("GradientReversal-schedule", lambda: N.GradientReversal(alpha=lambda p: -1.0),
     r"GradientReversal: alpha must be >= 0, got -1.0"),
    ("GradientReversal-progress", lambda: N.GradientReversal(G.dann_schedule).set_progress(2.0),
     r"GradientReversal: progress must be in \[0, 1\], got 2.0"),
]


@pytest.mark.parametrize(("call", "match"), [pytest.param(c, m, id=i) for i, c, m in
                                             FUNCTION_CASES + MODULE_CASES])
def test_bad_input_raises_gradsmith_error(call, match):
    with pytest.raises(GradsmithError, match=match):
        call()


def test_gradsmith_error_is_a_value_error():
    with pytest.raises(ValueError):
        G.clipped_relu(X, -1.0)
