"""Op-specific properties of part 1 that a reference comparison alone does not show."""

from __future__ import annotations

import math

import pytest
import torch
from torch.autograd.graph import saved_tensors_hooks

import gradsmith.functional as G


def _saved(fn, *args):
    """Tensors saved for backward while running ``fn(*args)``."""
    saved = []

    def pack(t):
        saved.append(t)
        return t

    with saved_tensors_hooks(pack, lambda t: t):
        out = fn(*args)
    return out, saved


def _x(*shape, seed=0, dtype=torch.float64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


# --- soft_round: the limits and the continuity the paper's construction promises ---

def test_soft_round_limits_are_identity_and_round():
    x = _x(200, seed=1) * 3
    torch.testing.assert_close(G.soft_round(x, 1e-4), x, atol=1e-5, rtol=0)
    away = x[(x - x.round()).abs() < 0.3]  # away from the jump at half-integers
    torch.testing.assert_close(G.soft_round(away, 60.0), away.round(), atol=1e-9, rtol=0)


def test_soft_round_is_continuous_and_smooth_across_integers():
    n = torch.tensor([-2.0, 0.0, 3.0], dtype=torch.float64)
    h = 1e-9
    left = (n - h).requires_grad_()
    right = (n + h).requires_grad_()
    torch.testing.assert_close(G.soft_round(n, 5.0), n, atol=1e-15, rtol=0)
    torch.testing.assert_close(G.soft_round(left, 5.0), G.soft_round(right, 5.0), atol=1e-8,
                               rtol=0)
    (gl,) = torch.autograd.grad(G.soft_round(left, 5.0).sum(), left)
    (gr,) = torch.autograd.grad(G.soft_round(right, 5.0).sum(), right)
    torch.testing.assert_close(gl, gr, atol=1e-7, rtol=0)
    # slope at an integer: alpha (1 - tanh(alpha/2)^2) / (2 tanh(alpha/2))
    t = math.tanh(2.5)
    assert gl[0].item() == pytest.approx(5.0 * (1 - t * t) / (2 * t), rel=1e-6)


# --- gumbel_softmax: sampling semantics ---

def test_gumbel_softmax_generator_reproducible_and_consumes_no_global_rng():
    logits = _x(4, 6)
    torch.manual_seed(0)
    before = torch.rand(1)
    torch.manual_seed(0)
    a = G.gumbel_softmax(logits, generator=torch.Generator().manual_seed(5))
    after = torch.rand(1)
    b = G.gumbel_softmax(logits, generator=torch.Generator().manual_seed(5))
    torch.testing.assert_close(a, b)
    torch.testing.assert_close(before, after)


def test_gumbel_softmax_hard_is_exactly_one_hot_at_the_soft_argmax():
    logits = _x(8, 5, seed=2)
    torch.manual_seed(1)
    hard = G.gumbel_softmax(logits, tau=0.3, hard=True)
    torch.manual_seed(1)
    soft = G.gumbel_softmax(logits, tau=0.3, hard=False)
    assert set(hard.unique().tolist()) == {0.0, 1.0}
    torch.testing.assert_close(hard.sum(-1), torch.ones(8, dtype=torch.float64))
    assert torch.equal(hard.argmax(-1), soft.argmax(-1))


def test_gumbel_softmax_hard_samples_follow_the_categorical_distribution():
    logits = torch.tensor([1.0, 0.0, -1.0, 2.0], dtype=torch.float64)
    gen = torch.Generator().manual_seed(0)
    samples = G.gumbel_softmax(logits.expand(20000, 4), hard=True, generator=gen)
    freq = samples.mean(0)
    # 20,000 draws: standard error <= 0.0036 per category; 0.015 is > 4 standard errors.
    torch.testing.assert_close(freq, torch.softmax(logits, 0), atol=0.015, rtol=0)


# --- what each op saves for backward ---

@pytest.mark.parametrize(("call", "packed"), [
    pytest.param(lambda x, w: G.clipped_relu(x, 1.0), False, id="clipped_relu"),
    pytest.param(lambda x, w: G.soft_threshold(x, 0.5), False, id="soft_threshold"),
    pytest.param(lambda x, w: G.sign_ste(x, 1.0), False, id="sign_ste-clip"),
    pytest.param(lambda x, w: G.fused_add_relu(x, x.flip(0)), True, id="fused_add_relu"),
    pytest.param(lambda x, w: G.fused_linear_relu(x, w), True, id="fused_linear_relu"),
])
def test_mask_ops_save_a_mask_not_an_activation(call, packed):
    x = _x(15, 7, dtype=torch.float32).requires_grad_()
    w = _x(7, 7, seed=1, dtype=torch.float32).requires_grad_()
    out, saved = _saved(call, x, w)
    activations = [t for t in saved if t.is_floating_point()
                   and t.data_ptr() not in (x.data_ptr(), w.data_ptr())]
    assert activations == []
    masks = [t for t in saved if not t.is_floating_point()]
    assert len(masks) == 1
    if packed:  # one bit per element: ceil(105 / 8) bytes
        assert masks[0].dtype == torch.uint8 and masks[0].numel() == -(-out.numel() // 8)
    else:
        assert masks[0].dtype == torch.bool and masks[0].shape == out.shape


def test_scaled_sigmoid_saves_its_output():
    x = _x(5).requires_grad_()
    out, saved = _saved(lambda t: G.scaled_sigmoid(t, 2.0), x)
    assert len(saved) == 1 and saved[0].data_ptr() == out.data_ptr()


def test_estimators_without_masks_save_nothing():
    x = _x(5).requires_grad_()
    for call in (G.sign_ste, G.round_ste, lambda t: G.grad_scale(t, 2.0), G.grad_reverse):
        assert _saved(call, x)[1] == []


# --- identity-forward estimators behave like identity layers ---

def test_identity_estimators_return_a_copy_that_can_be_edited_in_place():
    x = _x(4).requires_grad_()
    for call in (lambda t: G.grad_scale(t, 2.0), G.grad_reverse):
        y = call(x)
        torch.testing.assert_close(y, x)
        assert y.requires_grad and y.data_ptr() != x.data_ptr()
        y.mul_(2)  # allowed: not a view of x
        y.sum().backward()


# --- numerically hard inputs ---

def test_logsumexp_matches_torch_on_infinities_and_large_values():
    x = torch.tensor([[float("-inf"), 0.0, 1.0], [1e4, 1e4, -1e4], [float("-inf"), 2.0, 3.0]],
                     dtype=torch.float32, requires_grad=True)
    xr = x.detach().clone().requires_grad_()
    y, yr = G.logsumexp(x, 1), torch.logsumexp(xr, 1)
    torch.testing.assert_close(y, yr)
    (g,), (gr,) = torch.autograd.grad(y.sum(), x), torch.autograd.grad(yr.sum(), xr)
    torch.testing.assert_close(g, gr)
    assert torch.isfinite(g).all()


def test_swish_accepts_a_per_channel_beta_and_sums_its_gradient():
    x = _x(6, 3, 4, seed=3)
    beta = torch.tensor([0.5, 1.0, 2.0], dtype=torch.float64).view(1, 3, 1).requires_grad_()
    (g,) = torch.autograd.grad(G.swish(x, beta).sum(), beta)
    b = beta.detach().clone().requires_grad_()
    (expected,) = torch.autograd.grad((x * torch.sigmoid(b * x)).sum(), b)
    assert g.shape == beta.shape
    torch.testing.assert_close(g, expected)



@pytest.mark.parametrize("shape", [(0,), (1,), (7,), (8,), (9,), (3, 5, 7), ()])
def test_bit_packed_mask_round_trips(shape):
    from gradsmith.ops._bitmask import pack_mask, unpack_mask

    mask = torch.rand(shape, generator=torch.Generator().manual_seed(0)) > 0.5
    packed = pack_mask(mask)
    assert packed.dtype == torch.uint8 and packed.numel() == -(-mask.numel() // 8)
    assert torch.equal(unpack_mask(packed, mask.shape), mask)
    batched = torch.rand(4, *shape, generator=torch.Generator().manual_seed(1)) > 0.5
    unpacked = torch.func.vmap(lambda m: unpack_mask(pack_mask(m), m.shape))(batched)
    assert torch.equal(unpacked, batched)


def test_gumbel_noise_does_not_depend_on_the_input_layout():
    logits = _x(5, 4, seed=6)
    transposed = logits.t().contiguous().t()  # same values, column-major strides
    a = G.gumbel_softmax(logits, generator=torch.Generator().manual_seed(2))
    b = G.gumbel_softmax(transposed, generator=torch.Generator().manual_seed(2))
    torch.testing.assert_close(a, b)
