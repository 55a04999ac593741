"""fused_add_relu's native kernels: same values and gradients as relu(x + y), and the torch
path wherever the kernels must not run (vmap, compile tracing, double backward, no compiler)."""

from __future__ import annotations

import sys

import pytest
import torch

import gradsmith.functional as G
from gradsmith.ops import _fused_native as native
from gradsmith.ops._bitmask import pack_mask, unpack_mask
from gradsmith.ops._native_build import open_library


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
    x, y = _pair(1001, torch.float64)
    out, bits = native.add_relu(x.detach(), y.detach())  # the mask written by the forward pass
    assert torch.equal(bits, pack_mask(~(out <= 0)))


def _kernel_results(n, dtype):
    x, y = (t.detach() for t in _pair(n, dtype))
    x[4::7] = -0.0  # -0 + -0 = -0 must come out as +0, as relu's does
    y[4::7] = -0.0
    out, bits = native.add_relu(x, y)
    g = torch.randn(n, generator=torch.Generator().manual_seed(2), dtype=dtype)
    one = torch.tensor(1.5, dtype=dtype).expand(n)
    return (out, bits, native.pack_positive(out), native.relu_mask_backward(g, bits, out.shape),
            native.relu_mask_backward(one, bits, out.shape))


@pytest.mark.parametrize("variant", [(), ("-DGRADSMITH_NO_AVX2",), ("-DGRADSMITH_PORTABLE",)],
                         ids=["widest", "sse2", "portable"])
def test_every_build_of_the_kernels_gives_the_same_bits(variant, monkeypatch):
    # The CPU here takes the widest loops; the narrower builds are what other CPUs run.
    # 100,003 elements: over the parallel grain, two threads' ranges, a short last byte.
    assert native.usable(torch.ones(8), torch.ones(8))
    threads = bool(native._STATE["threads"])
    flags = ("-fopenmp", *variant) if threads else variant
    lib = native._bind(open_library("fused", native._SOURCE, flags))
    for dtype in (torch.float32, torch.float64):
        expected = _kernel_results(100_003, dtype)
        monkeypatch.setitem(native._STATE, "lib", lib)
        got = _kernel_results(100_003, dtype)
        monkeypatch.undo()
        for a, b in zip(got, expected):
            assert torch.equal(a.view(torch.uint8), b.view(torch.uint8))  # bit for bit
        out, bits = expected[:2]
        assert not out.signbit().any()
        assert torch.equal(bits, pack_mask(~(out <= 0)))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="torch's libgomp: Linux wheels")
def test_kernels_run_on_torchs_own_openmp_workers():
    # One OpenMP runtime in the process (torch's), and the kernels built to use it: a second
    # pool on the same cores would compete with torch's spinning workers.
    assert native.usable(torch.ones(8), torch.ones(8))
    assert native._STATE["threads"] is True
    assert len(native._openmp_runtimes()) == 1


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
    # The native kernels split over torch's threads above the grain (300,001 elements: the
    # last mask byte short, and 3 threads' ranges not a multiple of 64)
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


def test_without_shared_openmp_the_forward_is_torchs_parallel_add(monkeypatch):
    # Where the kernels cannot use torch's workers they run on one thread, and at 2 threads
    # the forward's add-and-clamp is torch's (the mask is still packed natively).
    assert native.usable(torch.ones(8), torch.ones(8))
    monkeypatch.setitem(native._STATE, "threads", False)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        test_values_and_gradients_match_relu_of_sum(300_001, torch.float32)
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("why", ["openmp-build-fails", "two-openmp-runtimes"])
def test_kernels_fall_back_to_one_thread_when_they_cannot_share_torchs_pool(why, monkeypatch):
    # A compiler without OpenMP (clang without libomp) or a process with a second OpenMP
    # runtime: the kernels are built without OpenMP and stay correct, on one thread.
    from gradsmith.ops import _native_build

    real = _native_build.open_library

    def no_openmp(stem, source, flags=()):
        if "-fopenmp" in flags:
            raise _native_build.NativeUnavailable("no OpenMP here")
        return real(stem, source, flags)

    if why == "openmp-build-fails":
        monkeypatch.setattr(native, "open_library", no_openmp)
    else:
        monkeypatch.setattr(native, "_openmp_runtimes", lambda: {"/a/libgomp.so.1",
                                                                   "/b/libgomp.so.1"})
    monkeypatch.setattr(native, "_STATE", {})
    assert native.usable(torch.ones(8), torch.ones(8))
    assert native._STATE["threads"] is False and native._load().gradsmith_openmp() == 0
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        test_values_and_gradients_match_relu_of_sum(300_001, torch.float32)
        test_values_and_gradients_match_relu_of_sum(1000, torch.float64)
    finally:
        torch.set_num_threads(before)
