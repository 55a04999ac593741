"""LSQ and PACT: values and gradients against PyTorch's learnable fake-quantize and the papers'
formulas, initialisation, modules, saved bytes, once_differentiable and bad input."""

from __future__ import annotations

import math

import pytest
import torch

import gradsmith.nn as N
from gradsmith import GradsmithError
from gradsmith.bench import saved_bytes
from gradsmith.functional import fake_quantize_lsq, lsq_init_scale, lsq_surrogate, pact

QRANGE = {(8, True): (-128, 127), (4, False): (0, 15), (2, True): (-2, 1)}


def _x(n, seed, scale=1.0):
    return torch.randn(n, generator=torch.Generator().manual_seed(seed)) * scale


def _torch_learnable(x, scale, qn, qp, grad_factor):
    return torch._fake_quantize_learnable_per_tensor_affine(x, scale.reshape(1),
                                                            torch.zeros(1), qn, qp, grad_factor)


def _band(v, qn, qp):
    """Where PyTorch (range test on round(v)) and the paper (on v) disagree: half a step out."""
    return ((v > qp) & (v < qp + 0.5)) | ((v < qn) & (v >= qn - 0.5))


@pytest.mark.parametrize(("bits", "signed"), list(QRANGE))
def test_lsq_matches_pytorch_learnable_fake_quantize(bits, signed):
    qn, qp = QRANGE[(bits, signed)]
    s0 = 0.05 if bits == 8 else 0.3
    x0 = _x(5000, seed=bits, scale=3.0)
    x0 = x0[~_band(x0 / s0, qn, qp)]  # the documented difference is tested separately
    g = _x(x0.numel(), seed=99)
    factor = 1 / math.sqrt(x0.numel() * qp)
    outs, grads = [], []
    for fn in (lambda x, s: fake_quantize_lsq(x, s, bits, signed),
               lambda x, s: _torch_learnable(x, s, qn, qp, factor)):
        x, s = x0.clone().requires_grad_(), torch.tensor(s0, requires_grad=True)
        out = fn(x, s)
        out.backward(g)
        outs.append(out)
        grads.append((x.grad, s.grad.reshape(())))
    torch.testing.assert_close(outs[0], outs[1], atol=0, rtol=0)
    torch.testing.assert_close(grads[0][0], grads[1][0], atol=0, rtol=0)
    torch.testing.assert_close(grads[0][1], grads[1][1], atol=1e-5, rtol=1e-5)


def test_lsq_follows_the_paper_half_a_step_outside_the_range():
    # v = x / s = 127.3: PyTorch rounds to 127 (in range: dx = 1, ds = round(v) - v = -0.3);
    # Esser et al. clip first (v >= Qp): dx = 0 and ds = Qp.
    x = torch.tensor([127.3 * 0.1, -128.4 * 0.1], dtype=torch.float64, requires_grad=True)
    s = torch.tensor(0.1, dtype=torch.float64, requires_grad=True)
    fake_quantize_lsq(x, s, 8, True, grad_scale=1.0).sum().backward()
    torch.testing.assert_close(x.grad, torch.zeros(2, dtype=torch.float64))
    torch.testing.assert_close(s.grad, torch.tensor(127.0 - 128.0, dtype=torch.float64))


def test_lsq_gradients_follow_eq3_with_the_default_gradient_scale():
    x = torch.tensor([0.26, -0.04, 9.0, -9.0, 0.55], dtype=torch.float64, requires_grad=True)
    s = torch.tensor(0.1, dtype=torch.float64, requires_grad=True)
    out = fake_quantize_lsq(x, s, bits=4)  # Qn = -8, Qp = 7
    torch.testing.assert_close(out, torch.tensor([0.3, 0.0, 0.7, -0.8, 0.6], dtype=torch.float64))
    g = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0], dtype=torch.float64)
    out.backward(g)
    v = torch.tensor([2.6, -0.4, 90.0, -90.0, 5.5], dtype=torch.float64)
    per_elem = torch.tensor([3 - 2.6, 0 + 0.4, 7.0, -8.0, 6 - 5.5], dtype=torch.float64)
    expected_ds = (g * per_elem).sum() / math.sqrt(5 * 7)
    torch.testing.assert_close(s.grad, expected_ds)
    torch.testing.assert_close(x.grad, g * ((v >= -8) & (v <= 7)))


def test_lsq_surrogate_has_the_estimator_gradients():
    x0, s0 = _x(300, seed=1, scale=0.4).double(), torch.tensor(0.05, dtype=torch.float64)
    x0 = x0[~_band(x0 / s0, -8, 7)]
    g = _x(x0.numel(), seed=2).double()
    grads = []
    for fn in (fake_quantize_lsq, lsq_surrogate):
        x, s = x0.clone().requires_grad_(), s0.clone().requires_grad_()
        fn(x, s, 4, True).backward(g)
        grads.append((x.grad, s.grad))
    torch.testing.assert_close(grads[0], grads[1])


def test_pact_values_and_gradients_follow_the_paper():
    x = torch.tensor([-1.0, 0.0, 0.4, 1.49, 2.0, 7.0], dtype=torch.float64, requires_grad=True)
    alpha = torch.tensor(1.5, dtype=torch.float64, requires_grad=True)
    out = pact(x, alpha, bits=2)  # levels 0, 0.5, 1.0, 1.5
    torch.testing.assert_close(out, torch.tensor([0, 0, 0.5, 1.5, 1.5, 1.5], dtype=torch.float64))
    g = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], dtype=torch.float64)
    out.backward(g)
    torch.testing.assert_close(x.grad, torch.tensor([0, 2.0, 3.0, 4.0, 0, 0],
                                                    dtype=torch.float64))
    torch.testing.assert_close(alpha.grad, torch.tensor(11.0, dtype=torch.float64))


def test_pact_float32_uses_the_fused_kernel_and_matches_the_formula():
    x = _x(10_000, seed=3, scale=3.0)
    alpha = torch.tensor(2.5)
    levels = 2 ** 4 - 1
    ref = (x.clamp(0, 2.5) / (2.5 / levels)).round() * (2.5 / levels)
    torch.testing.assert_close(pact(x, alpha, 4), ref, atol=1e-6, rtol=0)


def test_lsq_init_scale_is_the_papers():
    x = _x(1000, seed=4)
    torch.testing.assert_close(lsq_init_scale(x, 8), 2 * x.abs().mean() / math.sqrt(127))
    torch.testing.assert_close(lsq_init_scale(x, 4, False), 2 * x.abs().mean() / math.sqrt(15))


def test_fake_quantize_module_initialises_then_learns():
    q = N.FakeQuantizeLSQ(bits=4)
    x = _x(64, seed=5)
    out = q(x)
    torch.testing.assert_close(q.scale.detach(), 2 * x.abs().mean() / math.sqrt(7))
    out.sum().backward()
    assert q.scale.grad is not None and bool(q.initialized)
    before = q.scale.detach().clone()
    q(x * 10)  # no re-initialisation on later batches
    torch.testing.assert_close(q.scale.detach(), before)
    assert repr(N.FakeQuantizeLSQ(3, False, 0.5)) == (
        "FakeQuantizeLSQ(bits=3, signed=False, grad_scale=0.5)")


def test_pact_module():
    m = N.PACT(bits=3, alpha=2.0)
    assert repr(m) == "PACT(bits=3, alpha=2.0)"
    m(torch.tensor([3.0, 1.0, -1.0])).sum().backward()
    torch.testing.assert_close(m.alpha.grad, torch.tensor(1.0))


def test_saved_bytes_no_more_than_pytorch():
    x = _x(4096, seed=6).requires_grad_()
    s = torch.tensor([0.05], requires_grad=True)
    ours = saved_bytes(lambda a, b: fake_quantize_lsq(a, b), (x, s))
    theirs = saved_bytes(lambda a, b: _torch_learnable(a, b, -128, 127, 1.0), (x, s))
    assert ours == 4096 * 4 + 4 and ours <= theirs
    assert saved_bytes(lambda a, b: pact(a, b), (x, torch.tensor(3.0, requires_grad=True))) == (
        4096 * 4 + 4)


@pytest.mark.parametrize("fn", [lambda x: fake_quantize_lsq(x, torch.tensor(0.1, requires_grad=True)),
                                lambda x: pact(x, torch.tensor(1.0, requires_grad=True))])
def test_second_derivative_raises_instead_of_being_wrong(fn):
    x = _x(10, seed=7).requires_grad_()
    v = torch.ones(10, requires_grad=True)  # a cotangent in the graph, as double backward has
    (gx,) = torch.autograd.grad(fn(x), x, v, create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable"):
        gx.sum().backward()


def test_vmap_over_scales_matches_a_loop():
    x = _x(20, seed=8)
    scales = torch.tensor([0.05, 0.1, 0.2])
    batched = torch.vmap(lambda s: fake_quantize_lsq(x, s, 4))(scales)
    looped = torch.stack([fake_quantize_lsq(x, s, 4) for s in scales])
    torch.testing.assert_close(batched, looped)


_T = torch.ones(3)


@pytest.mark.parametrize(("call", "match"), [
    (lambda: fake_quantize_lsq(torch.arange(3), 0.1), "fake_quantize_lsq: x must be a floating"),
    (lambda: fake_quantize_lsq(_T, 0.1, bits=1), r"bits must be an int in \[2, 16\], got 1; 8 bits is the usual"),
    (lambda: fake_quantize_lsq(_T, 0.1, bits=17), r"bits must be an int in \[2, 16\], got 17"),
    (lambda: fake_quantize_lsq(_T, 0.1, bits=8.0), "bits must be an int, got float"),
    (lambda: fake_quantize_lsq(_T, 0.0), "scale must be > 0, got 0.0"),
    (lambda: fake_quantize_lsq(_T, torch.tensor(-0.5)), "scale must be a finite value > 0, got -0.5"),
    (lambda: fake_quantize_lsq(_T, torch.ones(2)), r"scale must hold one value .* got shape \(2,\)"),
    (lambda: fake_quantize_lsq(_T, torch.tensor(1)), "scale must be a floating-point tensor"),
    (lambda: fake_quantize_lsq(_T, 0.1, signed="yes"), "signed must be True or False"),
    (lambda: fake_quantize_lsq(_T, 0.1, grad_scale=0), "grad_scale must be > 0, got 0"),
    (lambda: pact(_T, -1.0), "pact: alpha must be > 0, got -1.0"),
    (lambda: pact(_T, 1.0, bits=0), r"pact: bits must be an int in \[1, 16\], got 0; 8 bits is the usual"),
    (lambda: pact(torch.ones(2, dtype=torch.int32), 1.0), "pact: x must be a floating"),
    (lambda: lsq_init_scale(torch.zeros(4)), "x must not be all zeros"),
    (lambda: N.FakeQuantizeLSQ(bits=20), r"FakeQuantizeLSQ: bits must be an int in \[2, 16\]"),
    (lambda: N.PACT(alpha=0.0), "PACT: alpha must be > 0, got 0.0"),
])
def test_bad_input_raises_gradsmith_error(call, match):
    with pytest.raises(GradsmithError, match=match):
        call()
