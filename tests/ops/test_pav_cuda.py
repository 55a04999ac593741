"""The GPU PAV kernel (``_pav_cuda``): its CUDA source, compiled here as C++ for the host with
one emulated thread per row, gives the CPU kernel's solutions and blocks; on a machine with a
GPU the real kernel is compared too, and runs without any host synchronisation."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import warnings

import pytest
import torch

from gradsmith.ops import _pav_cuda, _pav_native

_HOST = r"""
#include <cmath>
using std::exp; using std::log;
#define __device__ static
#define __global__
struct Dim { long long x; };
static Dim blockIdx = {0}, blockDim = {1}, threadIdx = {0};
""" + _pav_cuda._SOURCE + r"""
#define HOST(T, NAME)                                                                         \
extern "C" void host_##NAME(const T *y, const T *w, int rows, int n, T *sol, int64 *block,   \
                            double *scratch, int64 *starts) {                                 \
    for (int r = 0; r < rows; r++) { threadIdx.x = r; NAME(y, w, rows, n, sol, block,        \
                                                           scratch, starts); }               \
}
HOST(float, gradsmith_pav_l2_f32)
HOST(double, gradsmith_pav_l2_f64)
HOST(float, gradsmith_pav_kl_f32)
HOST(double, gradsmith_pav_kl_f64)
"""


@pytest.fixture(scope="module")
def host_kernels(tmp_path_factory):
    cxx = shutil.which("c++") or shutil.which("g++")
    assert cxx, "a C++ compiler is needed to check the CUDA source on the host"
    folder = tmp_path_factory.mktemp("pav_cuda")
    src, lib = folder / "pav_cuda_host.cpp", folder / "pav_cuda_host.so"
    src.write_text(_HOST)
    subprocess.run([cxx, "-O2", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True,
                   capture_output=True, timeout=120)
    return ctypes.CDLL(str(lib))


def _host_solve(lib, name, y, w=None):
    rows, n = y.shape
    y = y.contiguous()
    w = y if w is None else w.contiguous()
    sol, block = torch.empty_like(y), torch.empty((rows, n), dtype=torch.int64)
    scratch = torch.empty(rows * 5 * n, dtype=torch.float64)
    starts = torch.empty(rows * (n + 1), dtype=torch.int64)
    suffix = "f32" if y.dtype == torch.float32 else "f64"
    getattr(lib, f"host_gradsmith_pav_{name}_{suffix}")(
        ctypes.c_void_p(y.data_ptr()), ctypes.c_void_p(w.data_ptr()), ctypes.c_int(rows),
        ctypes.c_int(n), ctypes.c_void_p(sol.data_ptr()), ctypes.c_void_p(block.data_ptr()),
        ctypes.c_void_p(scratch.data_ptr()), ctypes.c_void_p(starts.data_ptr()))
    return sol, block


def _rows(dtype, seed):
    gen = torch.Generator().manual_seed(seed)
    y = torch.randn(6, 50, generator=gen, dtype=torch.float64)
    y[1] = torch.linspace(3, -3, 50, dtype=torch.float64)  # already decreasing: 50 blocks
    y[2] = torch.linspace(-3, 3, 50, dtype=torch.float64)  # increasing: one block
    y[3, 10:20] = 0.5  # ties pool, as torchsort
    w = torch.randn(6, 50, generator=gen, dtype=torch.float64).sort(-1, descending=True)[0]
    return y.to(dtype), w.to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", ["l2", "kl"])
def test_cuda_source_matches_the_cpu_kernel(host_kernels, name, dtype):
    lib = _pav_native.load()
    assert lib is not None
    y, w = _rows(dtype, seed=3)
    got = _host_solve(host_kernels, name, y, w if name == "kl" else None)
    want = (_pav_native.solve_l2(lib, y) if name == "l2" else _pav_native.solve_kl(lib, y, w))
    torch.testing.assert_close(got[0], want[0], rtol=0, atol=0)
    assert torch.equal(got[1], want[1])


def test_without_a_gpu_the_kernel_is_not_loaded():
    if torch.cuda.is_available():
        x = torch.randn(8, 1000, device="cuda")
        from gradsmith.functional import soft_rank, soft_sort

        torch.cuda.synchronize()
        # a host synchronisation inside would raise under this mode (torch warns, once, that
        # the mode is a prototype: not the code under test)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Synchronization debug mode")
            torch.cuda.set_sync_debug_mode("error")
        try:
            for fn in (soft_rank, soft_sort):
                fn(x)
        finally:
            torch.cuda.set_sync_debug_mode("default")
        assert _pav_cuda.load(x.device, "l2", torch.float32) is not None
        cpu = soft_rank(x.cpu())
        torch.testing.assert_close(soft_rank(x).cpu(), cpu)
    else:
        assert _pav_cuda.load(torch.device("cpu"), "l2", torch.float32) is None
        assert _pav_cuda.load(torch.device("cuda"), "l2", torch.bfloat16) is None
