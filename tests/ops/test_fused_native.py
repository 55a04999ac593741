"""fused_add_relu's native kernels: same values and gradients as relu(x + y), and the torch
path wherever the kernels must not run (vmap, compile tracing, double backward, no compiler)."""

from __future__ import annotations

import pytest
import torch

import gradsmith.functional as G
from gradsmith.ops import _fused_native as native
from gradsmith.ops._bitmask import pack_mask, unpack_mask


def _pair(n, dtype, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, generator=gen, dtype=torch.float64).to(dtype)
    y = torch.randn(n, generator=gen, dtype=torch.float64).to(dtype)
    if n >= 4:  # NaN, -inf, an exact zero sum (-0 or +0), a positive sum
        x[0], x[1], y[2], x[3] = float("nan"), float("-inf"), -x[2], abs(x[3]) + abs(y[3])
    return x.requires_grad_(), y.requires_grad_()


def test_native_kernels_are_available_here():
    assert native.usable(torch.ones(8), torch.ones(8)), "a C compiler is expected on CI"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 63, 1000, 300_001])
def test_values_and_gradients_match_relu_of_sum(n, dtype):
    x, y = _pair(n, dtype)
    xr, yr = (t.detach().clone().requires_grad_() for t in (x, y))
    out, ref = G.fused_add_relu(x, y), torch.relu(xr + yr)
    torch.testing.assert_close(out, ref, equal_nan=True, rtol=0, atol=0)
    g = torch.randn(n, generator=torch.Generator().manual_seed(1), dtype=dtype)
    got = torch.autograd.grad(out, (x, y), g)
    expected = torch.autograd.grad(ref, (xr, yr), g)
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b, equal_nan=True, rtol=0, atol=0)


def test_a_broadcast_scalar_gradient_is_read_in_place():
    x, y = _pair(10_000, torch.float32)
    G.fused_add_relu(x, y).sum().backward()  # the incoming gradient has strides (0,)
    xr, yr = (t.detach().clone().requires_grad_() for t in (x, y))
    torch.relu(xr + yr).sum().backward()
    torch.testing.assert_close(x.grad, xr.grad, rtol=0, atol=0)
    torch.testing.assert_close(y.grad, yr.grad, rtol=0, atol=0)


def test_native_mask_has_the_torch_layout():
    v = torch.randn(1001, dtype=torch.float64)
    v[5] = float("nan")
    torch.testing.assert_close(native.pack_positive(v), pack_mask(~(v <= 0)), rtol=0, atol=0)
    assert torch.equal(unpack_mask(native.pack_positive(v), v.shape), ~(v <= 0))


def test_double_backward_takes_the_differentiable_path():
    x, y = (torch.randn(50, dtype=torch.float64, requires_grad=True) for _ in range(2))
    (gx,) = torch.autograd.grad(G.fused_add_relu(x, y).sum(), x, create_graph=True)
    assert gx.requires_grad or not gx.grad_fn  # the mask is constant: d2 = 0 where defined
    (h,) = torch.autograd.grad((gx * x).sum(), x, allow_unused=True)
    torch.testing.assert_close(h, (x + y > 0).double())


def test_the_torch_path_when_native_is_disabled(monkeypatch):
    monkeypatch.setenv("GRADSMITH_NATIVE", "torch")
    monkeypatch.setattr(native, "_STATE", {})
    assert not native.usable(torch.ones(8), torch.ones(8))
    x, y = _pair(1000, torch.float32)
    torch.testing.assert_close(G.fused_add_relu(x, y), torch.relu(x + y), equal_nan=True)


def test_wrapped_and_traced_tensors_are_not_native():
    seen = []

    def probe(t):
        seen.append(native.usable(t))
        return t * 2

    torch.func.vmap(probe)(torch.ones(3, 4))
    torch.compile(probe, backend="eager", fullgraph=True)(torch.ones(4))
    assert seen == [False, False]
    assert not native.usable(torch.ones(4, dtype=torch.bfloat16))
    assert not native.usable(torch.ones(4, device="meta"))


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_every_thread_count_matches_relu_of_sum(threads):
    # 1 thread: the native add-and-clamp kernel; more: torch's add and in-place relu, with the
    # native mask packing and backward either way (300,001 elements: the last mask byte short)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        test_values_and_gradients_match_relu_of_sum(300_001, torch.float32)
        x, y = _pair(300_001, torch.float32)
        out = G.fused_add_relu(x, y)
        (gx, _) = torch.autograd.grad(out.sum(), (x, y))  # broadcast scalar gradient path
        torch.testing.assert_close(gx, (~(x.detach() + y.detach() <= 0)).float())
    finally:
        torch.set_num_threads(before)
