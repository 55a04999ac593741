"""Every catalog op validates devices, dtypes and ranges before any work: hostile inputs get a
GradsmithError naming the function, the argument and the value, never a raw torch error or
garbage. Meta tensors stand in for a second device (cpu + meta is what cpu + cuda looks like
to the checks on a machine without a GPU)."""

from __future__ import annotations

import pytest
import torch

import gradsmith.functional as G
import gradsmith.nn as N
from gradsmith import GradsmithError
from gradsmith.ops._validate import check_devices, check_fits

X = torch.randn(4, 5)
META = torch.randn(4, 5, device="meta")
CPLX = torch.randn(4, 5, dtype=torch.complex64)
INT = torch.arange(20).reshape(4, 5)
Q = torch.randn(2, 3, 8, 4)
QM = Q.to("meta")
S = torch.tensor(3.0)


def _net(device="cpu"):
    return torch.nn.Sequential(torch.nn.Linear(5, 5), torch.nn.ReLU()).to(device)


# (id, call, regex the message must match: function, argument, value or fix)
CASES = [
    # meta tensors (no data) and meta beside cpu (a second device)
    ("clipped_relu-meta", lambda: G.clipped_relu(META), r"clipped_relu: x is on the meta device"),
    ("swish-meta-beta", lambda: G.swish(X, torch.ones(5, device="meta")),
     r"swish: beta is on the meta device.*shape \(5,\)"),
    ("scaled_sigmoid-meta", lambda: G.scaled_sigmoid(META), r"scaled_sigmoid: x is on the meta"),
    ("soft_round-meta", lambda: G.soft_round(META), r"soft_round: x is on the meta"),
    ("soft_threshold-meta-t", lambda: G.soft_threshold(X, torch.ones(5, device="meta")),
     r"soft_threshold: threshold is on the meta"),
    ("sign_ste-meta", lambda: G.sign_ste(META), r"sign_ste: x is on the meta"),
    ("round_ste-meta", lambda: G.round_ste(META), r"round_ste: x is on the meta"),
    ("gumbel-meta", lambda: G.gumbel_softmax(META), r"gumbel_softmax: logits is on the meta"),
    ("grad_scale-meta", lambda: G.grad_scale(META, 0.5), r"grad_scale: x is on the meta"),
    ("grad_reverse-meta", lambda: G.grad_reverse(META), r"grad_reverse: x is on the meta"),
    ("linear-cpu-x-meta-w", lambda: G.fused_linear_relu(X, torch.randn(3, 5, device="meta"),
                                                        torch.randn(3)),
     r"fused_linear_relu: weight is on the meta device.*\(3, 5\)"),
    ("linear-meta-bias", lambda: G.fused_linear_relu(X, torch.randn(3, 5),
                                                     torch.randn(3, device="meta")),
     r"fused_linear_relu: bias is on the meta"),
    ("add_relu-cpu-meta", lambda: G.fused_add_relu(X, META), r"fused_add_relu: y is on the meta"),
    ("logsumexp-meta", lambda: G.logsumexp(META, 1), r"logsumexp: x is on the meta"),
    ("attention-meta", lambda: G.attention(QM, QM, QM), r"attention: q is on the meta"),
    ("attention-cpu-q-meta-k", lambda: G.attention(Q, QM, Q), r"attention: k is on the meta"),
    ("attention-meta-bias", lambda: G.attention(Q, Q, Q, bias=torch.randn(8, 8, device="meta")),
     r"attention: bias is on the meta"),
    ("attention-meta-mask", lambda: G.attention(
        Q, Q, Q, mask=torch.ones(8, 8, dtype=torch.bool, device="meta")),
     r"attention: mask is on the meta"),
    ("soft_rank-meta", lambda: G.soft_rank(META), r"soft_rank: x is on the meta"),
    ("soft_sort-meta", lambda: G.soft_sort(META), r"soft_sort: x is on the meta"),
    ("lsq-meta", lambda: G.fake_quantize_lsq(META, torch.tensor(0.1)), r"fake_quantize_lsq: x is"),
    ("lsq-meta-scale", lambda: G.fake_quantize_lsq(X, torch.tensor(0.1, device="meta")),
     r"fake_quantize_lsq: scale is on the meta"),
    ("lsq_init_scale-meta", lambda: G.lsq_init_scale(META), r"lsq_init_scale: x is on the meta"),
    ("pact-meta-alpha", lambda: G.pact(X, torch.tensor(3.0, device="meta")),
     r"pact: alpha is on the meta"),
    ("checkpoint-meta-x", lambda: G.checkpoint_sequential(_net(), META),
     r"checkpoint_sequential: x is on the meta"),
    ("checkpoint-meta-layer", lambda: G.checkpoint_sequential(_net("meta"), X),
     r"checkpoint_sequential: layer 0 \(Linear\) parameter 'weight' is on the meta"),
    # complex and integer dtypes
    ("clipped_relu-complex", lambda: G.clipped_relu(CPLX),
     r"clipped_relu: x must be a real floating-point tensor, got dtype torch.complex64"),
    ("add_relu-complex", lambda: G.fused_add_relu(CPLX, CPLX), r"fused_add_relu: x must be a real"),
    ("linear-complex", lambda: G.fused_linear_relu(CPLX, CPLX[:, :5]), r"x must be a real"),
    ("attention-complex", lambda: G.attention(*(Q.to(torch.complex64),) * 3),
     r"attention: q must be a real floating-point tensor"),
    ("soft_rank-complex", lambda: G.soft_rank(CPLX), r"soft_rank: x must be a real"),
    ("pact-complex", lambda: G.pact(CPLX, S), r"pact: x must be a real"),
    ("soft_sort-int", lambda: G.soft_sort(INT), r"soft_sort: x must be a floating-point.*int64"),
    ("lsq-int-scale", lambda: G.fake_quantize_lsq(X, torch.tensor(1)),
     r"fake_quantize_lsq: scale must be a floating-point tensor, got dtype torch.int64"),
    ("attention-int-bias", lambda: G.attention(Q, Q, Q, bias=torch.ones(8, 8, dtype=torch.int32)),
     r"attention: bias must be a floating-point tensor"),
    # hyperparameters: inf, nan, beyond the dtype, denormal
    ("clipped_relu-1e308", lambda: G.clipped_relu(X, 1e308),
     r"clipped_relu: clip_val = 1e\+308 does not fit the input's dtype torch.float32"),
    ("ClippedReLU-1e308", lambda: N.ClippedReLU(1e308)(X), r"clip_val = 1e\+308 does not fit"),
    ("clipped_relu-inf", lambda: G.clipped_relu(X, float("inf")), r"clip_val must be finite"),
    ("swish-beta-1e308", lambda: G.swish(X, 1e308), r"swish: beta = 1e\+308 does not fit"),
    ("scaled_sigmoid-1e308", lambda: G.scaled_sigmoid(X, 1e308), r"scale = 1e\+308"),
    ("soft_round-tiny-alpha", lambda: G.soft_round(X, 1e-300),
     r"soft_round: alpha = 1e-300 does not fit"),
    ("soft_threshold-1e308", lambda: G.soft_threshold(X, 1e308), r"threshold = 1e\+308"),
    ("sign_ste-clip-nan", lambda: G.sign_ste(X, float("nan")), r"sign_ste: clip must be finite"),
    ("gumbel-tau-denormal", lambda: G.gumbel_softmax(X, 1e-320), r"gumbel_softmax: tau = "),
    ("grad_scale-1e308", lambda: G.grad_scale(X, 1e308), r"grad_scale: alpha = 1e\+308"),
    ("attention-scale-1e308", lambda: G.attention(Q, Q, Q, scale=1e308),
     r"attention: scale = 1e\+308 does not fit"),
    ("attention-scale-nan", lambda: G.attention(Q, Q, Q, scale=float("nan")),
     r"attention: scale must be finite, got nan"),
    ("soft_rank-strength-denormal", lambda: G.soft_rank(X, regularization_strength=1e-320),
     r"soft_rank: regularization_strength = .* does not fit"),
    ("soft_sort-strength-1e308", lambda: G.soft_sort(X, regularization_strength=1e308),
     r"soft_sort: regularization_strength = 1e\+308"),
    ("lsq-scale-nan", lambda: G.fake_quantize_lsq(X, torch.tensor(float("nan"))),
     r"fake_quantize_lsq: scale must be a finite value > 0, got nan"),
    ("lsq-scale-zero", lambda: G.fake_quantize_lsq(X, torch.tensor(0.0)), r"got 0.0"),
    ("lsq-grad-scale-inf", lambda: G.fake_quantize_lsq(X, S, grad_scale=float("inf")),
     r"fake_quantize_lsq: grad_scale must be finite, got inf"),
    ("pact-alpha-inf", lambda: G.pact(X, torch.tensor(float("inf"))),
     r"pact: alpha must be a finite value > 0, got inf"),
    ("pact-alpha-1e308", lambda: G.pact(X, 1e308), r"pact: alpha = 1e\+308 does not fit"),
    ("dann-nan", lambda: G.dann_schedule(float("nan")), r"dann_schedule: progress must be finite"),
    ("checkpoint-segments-huge", lambda: G.checkpoint_sequential(_net(), X, segments=10**9),
     r"segments must be an int in \[1, 2\], got 1000000000"),
    # wrong ranks and empty lengths
    ("attention-1d", lambda: G.attention(torch.randn(4), torch.randn(4), torch.randn(4)),
     r"attention: q must have at least 2 dims"),
    ("attention-empty-length", lambda: G.attention(torch.randn(2, 0, 4), torch.randn(2, 0, 4),
                                                   torch.randn(2, 0, 4)),
     r"attention: q must have a non-empty length dim"),
    ("soft_rank-0d", lambda: G.soft_rank(S), r"soft_rank: x must have at least 1 dimension"),
    ("linear-0d", lambda: G.fused_linear_relu(S, torch.randn(3, 1)),
     r"fused_linear_relu: x's last dimension must equal weight.shape\[1\]"),
    ("linear-3d-weight", lambda: G.fused_linear_relu(X, torch.randn(2, 3, 5)),
     r"weight must be 2-d"),
    ("gumbel-0d", lambda: G.gumbel_softmax(S), r"gumbel_softmax: logits must have at least 1"),
    ("logsumexp-dim-3", lambda: G.logsumexp(X, 3), r"logsumexp: dim must be in \[-2, 1\]"),
]


@pytest.mark.parametrize(("call", "match"), [pytest.param(c, m, id=i) for i, c, m in CASES])
def test_hostile_input_raises_gradsmith_error(call, match):
    with pytest.raises(GradsmithError, match=match):
        call()


@pytest.mark.parametrize(("name", "call", "reference"), [
    ("clipped_relu", lambda t: G.clipped_relu(t), lambda t: t.clamp(0, 6)),
    ("swish", lambda t: G.swish(t, 1.5), lambda t: t * torch.sigmoid(1.5 * t)),
    ("soft_threshold", lambda t: G.soft_threshold(t, 0.5),
     lambda t: torch.sign(t) * torch.relu(t.abs() - 0.5)),
    ("fused_add_relu", lambda t: G.fused_add_relu(t, t), lambda t: torch.relu(t + t)),
    ("logsumexp", lambda t: G.logsumexp(t, 1), lambda t: torch.logsumexp(t, 1)),
    ("soft_sort", lambda t: G.soft_sort(t), lambda t: t),
    ("gumbel_softmax", lambda t: G.gumbel_softmax(t), lambda t: t),
])
def test_empty_tensors_give_empty_results_with_gradients(name, call, reference):
    x = torch.randn(0, 5, requires_grad=True)
    out = call(x)
    assert out.shape == reference(x.detach()).shape
    out.sum().backward()
    assert x.grad is not None and x.grad.shape == x.shape


def test_mixed_real_devices_name_both_arguments_and_the_fix():
    class OnCuda(torch.Tensor):  # what a cuda tensor looks like to the check, without a GPU
        @property
        def device(self):
            return torch.device("cuda", 0)

    y = torch.ones(3).as_subclass(OnCuda)
    with pytest.raises(GradsmithError, match=r"f: x is on cpu but y is on cuda:0; every tensor "
                                             r"must be on one device: move it with "
                                             r"y.to\(x.device\)"):
        check_devices("f", ("x", torch.ones(3)), ("y", y))
    assert check_devices("f", ("x", torch.ones(2)), ("n", None), ("k", 3)) == torch.device("cpu")


def test_fits_accepts_the_dtype_range_and_zero():
    assert check_fits("f", "a", 3e38, torch.float32) == 3e38
    assert check_fits("f", "a", 0.0, torch.float16) == 0.0
    assert check_fits("f", "a", 1e308, torch.float64) == 1e308
    with pytest.raises(GradsmithError, match=r"f: a = 70000 does not fit .* torch.float16"):
        check_fits("f", "a", 70000.0, torch.float16)
