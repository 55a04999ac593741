"""Pool-adjacent-violators on the GPU: one CUDA thread per row, no host round trip (private).

The CPU kernel's algorithm (``_pav_native``) written as CUDA C and compiled at first use with
NVRTC through ``torch.cuda._compile_kernel`` (NVRTC ships with PyTorch's CUDA builds: no nvcc,
no build step at install), like the CPU kernel is compiled at first use with the system C
compiler. Each thread solves one row sequentially, as torchsort's CUDA kernel does; the launch
is asynchronous on the current stream and nothing is read back to the host, so a soft sort on
CUDA tensors never synchronises. Stacks live in a scratch buffer allocated by torch (the caching
allocator), one slice per row.

Not run in this repository's CI (no GPU there): ``tests/ops/test_pav_cuda.py`` runs it when a
GPU is present and otherwise checks the CUDA source with the CPU kernel's logic only by review.
Anything unusual (no NVRTC, an unsupported device, a compile error) makes :func:`load` return
``None`` and the caller falls back to the vectorised torch solver (same results, with host
synchronisations).
"""

from __future__ import annotations

import os
import threading

import torch

__all__ = ["load", "solve_l2", "solve_kl"]

_SOURCE = r"""
typedef long long int64;

__device__ inline void lse_merge(double *m1, double *s1, double m2, double s2) {
    if (*m1 >= m2) { if (m2 != *m1) s2 *= exp(m2 - *m1); *s1 += s2; }
    else { *s1 = *s1 * exp(*m1 - m2) + s2; *m1 = m2; }
}

/* One row per thread: the decreasing isotonic fit, pooling on equality like torchsort.
   scratch holds 5 doubles per element (p, q, v, ps, qs), starts n + 1 int64 per row. */
template <typename T, bool KL>
__device__ void pav_row(const T *y, const T *w, int64 n, T *sol, int64 *block, double *scratch,
                        int64 *start) {
    double *p = scratch, *q = scratch + n, *v = scratch + 2 * n;
    double *ps = scratch + 3 * n, *qs = scratch + 4 * n;
    int64 nb = 0;
    for (int64 i = 0; i < n; i++) {
        p[nb] = (double)y[i]; start[nb] = i;
        if (KL) { q[nb] = (double)w[i]; ps[nb] = qs[nb] = 1.0; v[nb] = p[nb] - q[nb]; }
        else { q[nb] = 1.0; v[nb] = p[nb]; }
        nb++;
        while (nb > 1 && v[nb - 2] <= v[nb - 1]) {
            if (KL) {
                lse_merge(&p[nb - 2], &ps[nb - 2], p[nb - 1], ps[nb - 1]);
                lse_merge(&q[nb - 2], &qs[nb - 2], q[nb - 1], qs[nb - 1]);
                v[nb - 2] = p[nb - 2] - q[nb - 2] + log(ps[nb - 2] / qs[nb - 2]);
            } else {
                p[nb - 2] += p[nb - 1]; q[nb - 2] += q[nb - 1];
                v[nb - 2] = p[nb - 2] / q[nb - 2];
            }
            nb--;
        }
    }
    start[nb] = n;
    for (int64 b = 0; b < nb; b++) {
        T value = (T)v[b];
        for (int64 j = start[b]; j < start[b + 1]; j++) { sol[j] = value; block[j] = b; }
    }
}

#define DEFINE(T, NAME, KL)                                                                   \
extern "C" __global__ void NAME(const T *y, const T *w, int rows, int n, T *sol,              \
                                int64 *block, double *scratch, int64 *starts) {               \
    int64 r = (int64)blockIdx.x * blockDim.x + threadIdx.x;                                   \
    if (r >= rows) return;                                                                    \
    int64 off = r * (int64)n;                                                                 \
    pav_row<T, KL>(y + off, KL ? w + off : 0, n, sol + off, block + off,                      \
                   scratch + 5 * off, starts + r * ((int64)n + 1));                           \
}

DEFINE(float, gradsmith_pav_l2_f32, false)
DEFINE(double, gradsmith_pav_l2_f64, false)
DEFINE(float, gradsmith_pav_kl_f32, true)
DEFINE(double, gradsmith_pav_kl_f64, true)
"""

_THREADS = 64  # rows per CUDA block: each thread is a whole (sequential) row
_LOCK = threading.Lock()
_KERNELS: dict[tuple[int, str], object] = {}
_DTYPES = {torch.float32: "f32", torch.float64: "f64"}


def load(device: torch.device, name: str, dtype: torch.dtype):
    """The compiled kernel ``name`` (``"l2"`` or ``"kl"``) for ``dtype`` on ``device``, or
    ``None`` when it cannot be had (no NVRTC, ``GRADSMITH_PAV=torch``, another dtype)."""
    if os.environ.get("GRADSMITH_PAV", "auto") == "torch" or dtype not in _DTYPES:
        return None
    compile_kernel = getattr(torch.cuda, "_compile_kernel", None)
    if compile_kernel is None or device.type != "cuda" or torch.version.cuda is None:
        return None
    kernel_name = f"gradsmith_pav_{name}_{_DTYPES[dtype]}"
    key = (device.index if device.index is not None else torch.cuda.current_device(),
           kernel_name)
    with _LOCK:
        if key not in _KERNELS:
            try:
                with torch.cuda.device(key[0]):
                    _KERNELS[key] = compile_kernel(_SOURCE, kernel_name)
            except Exception:  # NVRTC missing or refusing the source: the torch solver
                if os.environ.get("GRADSMITH_PAV") == "native":
                    raise
                _KERNELS[key] = None
        return _KERNELS[key]


def _run(kernel, y: torch.Tensor, w: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    rows, n = y.shape
    y = y.contiguous()
    w = y if w is None else w.to(y.dtype).contiguous()
    sol = torch.empty_like(y)
    block = torch.empty((rows, n), dtype=torch.int64, device=y.device)
    scratch = torch.empty((rows, 5 * n), dtype=torch.float64, device=y.device)
    starts = torch.empty((rows, n + 1), dtype=torch.int64, device=y.device)
    grid = ((rows + _THREADS - 1) // _THREADS, 1, 1)
    kernel(grid=grid, block=(_THREADS, 1, 1),
           args=[y, w, int(rows), int(n), sol, block, scratch, starts])
    return sol, block


def solve_l2(kernel, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """GPU :func:`gradsmith.ops._isotonic.isotonic_l2` (solution in y's dtype, local blocks)."""
    return _run(kernel, y, None)


def solve_kl(kernel, y: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """GPU :func:`gradsmith.ops._isotonic.isotonic_kl` (solution in y's dtype, local blocks)."""
    return _run(kernel, y, w)
