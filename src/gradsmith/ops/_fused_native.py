"""Native kernels of ``fused_add_relu``: one pass forward, one pass backward (private).

The torch composition needs five passes over memory for the forward (add, relu, compare, pack)
and two for the backward (unpack, multiply); these kernels add and clamp in one pass, pack the
mask (1 bit per element) from the output in one more, and in backward read the gradient (read
in place when it is one broadcast value, as ``loss.sum()``'s is) and the mask once. ``docs/ops.md`` has the measurements.

The kernels run on plain dense CPU float32/float64 tensors of one shape. Everything else
(broadcasting, other dtypes or devices, vmap, torch.compile tracing, autocast, a backward
that must itself be differentiable) takes the torch path, which gives the same results.
``GRADSMITH_NATIVE=torch`` forces the torch path.

The kernels run on the calling thread. With more than one torch thread the add-and-clamp pass
is torch's own add and in-place relu instead (parallel on torch's OpenMP pool, and the same
values): splitting the kernels over Python threads was slower, because those threads compete
with torch's OpenMP workers, which keep spinning for a while after every torch op
(``benchmarks/results/bench_targets_t2.md`` has the A/B).
The mask packing and the backward stay native and single-threaded (0.03x the bytes).
"""

from __future__ import annotations

import ctypes
import os
import threading

import torch

from gradsmith.ops._native_build import NativeUnavailable, open_library

__all__ = ["usable", "add_relu", "pack_positive", "relu_mask_backward"]

_SOURCE = r"""
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* The mask is !(v <= 0): true for positive values and for NaN (a NaN output passes its
   gradient, as torch.relu's backward does), false for zeros and negatives. Bits are packed
   little-endian within each byte. Every [start, end) range starts on a byte (a multiple of 8).
   SSE2 (every x86-64 CPU) does 4 floats or 2 doubles per instruction; other CPUs run the
   portable loops, with the same results. */

/* out = relu(x + y) = (x + y) where the mask holds, else 0 (NaN propagates, -0 becomes 0). */
void gradsmith_add_relu_f32(const float *x, const float *y, float *out, int64_t start,
                            int64_t end) {
    int64_t i = start;
#if defined(__SSE2__)
    const __m128 zero = _mm_setzero_ps();
    for (; i + 4 <= end; i += 4) {
        __m128 s = _mm_add_ps(_mm_loadu_ps(x + i), _mm_loadu_ps(y + i));
        _mm_storeu_ps(out + i, _mm_and_ps(_mm_cmpnle_ps(s, zero), s));
    }
#endif
    for (; i < end; i++) { float s = x[i] + y[i]; out[i] = !(s <= 0.0f) ? s : 0.0f; }
}

void gradsmith_add_relu_f64(const double *x, const double *y, double *out, int64_t start,
                            int64_t end) {
    int64_t i = start;
#if defined(__SSE2__)
    const __m128d zero = _mm_setzero_pd();
    for (; i + 2 <= end; i += 2) {
        __m128d s = _mm_add_pd(_mm_loadu_pd(x + i), _mm_loadu_pd(y + i));
        _mm_storeu_pd(out + i, _mm_and_pd(_mm_cmpnle_pd(s, zero), s));
    }
#endif
    for (; i < end; i++) { double s = x[i] + y[i]; out[i] = !(s <= 0.0) ? s : 0.0; }
}

void gradsmith_pack_positive_f32(const float *v, uint8_t *bits, int64_t start, int64_t end) {
    int64_t b = start;
#if defined(__SSE2__)
    const __m128 zero = _mm_setzero_ps();
    for (; b + 8 <= end; b += 8) {
        int lo = _mm_movemask_ps(_mm_cmpnle_ps(_mm_loadu_ps(v + b), zero));
        int hi = _mm_movemask_ps(_mm_cmpnle_ps(_mm_loadu_ps(v + b + 4), zero));
        bits[b >> 3] = (uint8_t)(lo | (hi << 4));
    }
#endif
    for (; b < end; b += 8) {
        uint8_t byte = 0;
        for (int64_t j = 0; j < 8 && b + j < end; j++) byte |= (uint8_t)(!(v[b + j] <= 0.0f) << j);
        bits[b >> 3] = byte;
    }
}

void gradsmith_pack_positive_f64(const double *v, uint8_t *bits, int64_t start, int64_t end) {
    int64_t b = start;
#if defined(__SSE2__)
    const __m128d zero = _mm_setzero_pd();
    for (; b + 8 <= end; b += 8) {
        int m = 0;
        for (int k = 0; k < 4; k++)
            m |= _mm_movemask_pd(_mm_cmpnle_pd(_mm_loadu_pd(v + b + 2 * k), zero)) << (2 * k);
        bits[b >> 3] = (uint8_t)m;
    }
#endif
    for (; b < end; b += 8) {
        uint8_t byte = 0;
        for (int64_t j = 0; j < 8 && b + j < end; j++) byte |= (uint8_t)(!(v[b + j] <= 0.0) << j);
        bits[b >> 3] = byte;
    }
}

/* out = g where the bit is set, else 0, as a bitwise AND with a lane mask looked up per byte
   (a plain loop the compiler vectorises). g_step 0 reads one broadcast value, 1 a dense g. */
static uint32_t lanes_f32[256][8];
static uint64_t lanes_f64[256][8];

/* Fill the lane masks; called once when the library is loaded, before any kernel runs. */
void gradsmith_mask_init(void) {
    for (int byte = 0; byte < 256; byte++)
        for (int j = 0; j < 8; j++) {
            lanes_f32[byte][j] = ((byte >> j) & 1) ? ~(uint32_t)0 : 0;
            lanes_f64[byte][j] = ((byte >> j) & 1) ? ~(uint64_t)0 : 0;
        }
}

#define DEFINE_BWD(T, U, NAME, lanes)                                                         \
void NAME(const T *g, int64_t g_step, const uint8_t *bits, T *out, int64_t start,            \
          int64_t end) {                                                                      \
    U one = 0;                                                                                \
    if (start >= end) return;                                                                 \
    if (!g_step) memcpy(&one, g, sizeof one);                                                 \
    int64_t b = start;                                                                        \
    for (; b + 8 <= end; b += 8) {                                                            \
        const U *m = lanes[bits[b >> 3]];                                                     \
        U *o = (U *)(out + b);                                                                \
        if (g_step) {                                                                         \
            const U *gb = (const U *)(g + b);                                                 \
            for (int j = 0; j < 8; j++) o[j] = gb[j] & m[j];                                  \
        } else {                                                                              \
            for (int j = 0; j < 8; j++) o[j] = one & m[j];                                    \
        }                                                                                     \
    }                                                                                         \
    for (int64_t i = b; i < end; i++)                                                         \
        out[i] = ((bits[i >> 3] >> (i & 7)) & 1) ? g[i * g_step] : (T)0;                      \
}

DEFINE_BWD(float, uint32_t, gradsmith_mask_bwd_f32, lanes_f32)
DEFINE_BWD(double, uint64_t, gradsmith_mask_bwd_f64, lanes_f64)
"""

_I64, _PTR = ctypes.c_int64, ctypes.c_void_p
_SIGNATURES = {
    "gradsmith_add_relu": [_PTR, _PTR, _PTR, _I64, _I64],
    "gradsmith_pack_positive": [_PTR, _PTR, _I64, _I64],
    "gradsmith_mask_bwd": [_PTR, _I64, _PTR, _PTR, _I64, _I64],
}
_DTYPES = {torch.float32: "f32", torch.float64: "f64"}

_LOCK = threading.Lock()
_STATE: dict[str, object] = {}


def _load() -> ctypes.CDLL | None:
    if os.environ.get("GRADSMITH_NATIVE", "auto") == "torch":
        return None
    with _LOCK:
        if "lib" not in _STATE:
            try:
                lib = open_library("fused", _SOURCE)
                for name, argtypes in _SIGNATURES.items():
                    for suffix in _DTYPES.values():
                        fn = getattr(lib, f"{name}_{suffix}")
                        fn.argtypes, fn.restype = argtypes, None
                lib.gradsmith_mask_init.argtypes, lib.gradsmith_mask_init.restype = [], None
                lib.gradsmith_mask_init()
                _STATE["lib"] = lib
            except (NativeUnavailable, AttributeError):
                _STATE["lib"] = None
        return _STATE["lib"]  # type: ignore[return-value]


def _plain(t: torch.Tensor) -> bool:
    """A real, dense CPU tensor whose memory ctypes may touch (not fake, batched or lazy)."""
    return (type(t) is torch.Tensor and t.device.type == "cpu" and t.layout == torch.strided
            and t.dtype in _DTYPES and not torch._C._functorch.is_functorch_wrapped_tensor(t))


def usable(*tensors: torch.Tensor) -> bool:
    """Whether the native kernels can run on these tensors now (else: the torch path)."""
    if torch.compiler.is_compiling() or torch.is_autocast_enabled("cpu"):
        return False
    first = tensors[0]
    return (all(_plain(t) and t.dtype == first.dtype for t in tensors)
            and _load() is not None)


def add_relu(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``relu(x + y)`` in one pass, for same-shape tensors (see :func:`usable`)."""
    if torch.get_num_threads() > 1:  # torch's parallel add beats one native thread (see above)
        return torch.add(x, y).relu_()
    x, y = x.contiguous(), y.contiguous()
    out = torch.empty_like(x, memory_format=torch.contiguous_format)
    fn = getattr(_load(), f"gradsmith_add_relu_{_DTYPES[x.dtype]}")
    fn(x.data_ptr(), y.data_ptr(), out.data_ptr(), 0, x.numel())
    return out


def pack_positive(v: torch.Tensor) -> torch.Tensor:
    """The bit-packed mask of ``~(v <= 0)`` in one pass (the layout of ``_bitmask.pack_mask``)."""
    v = v.contiguous()
    bits = torch.empty((v.numel() + 7) // 8, dtype=torch.uint8)
    fn = getattr(_load(), f"gradsmith_pack_positive_{_DTYPES[v.dtype]}")
    fn(v.data_ptr(), bits.data_ptr(), 0, v.numel())
    return bits


def relu_mask_backward(grad: torch.Tensor, bits: torch.Tensor,
                       shape: torch.Size) -> torch.Tensor:
    """``grad`` where the packed mask is set, else 0, as a new tensor of ``shape``.

    A gradient broadcast from a single value (``loss.sum()``'s, strides all 0) is read in place
    instead of being materialised first.
    """
    n = grad.numel()
    out = torch.empty(shape, dtype=grad.dtype)
    if n == 0:
        return out
    if all(s == 0 for s in grad.stride()):  # one value broadcast (or a 0-d tensor)
        g, step = grad.as_strided((1,), (1,)), 0
    else:
        g, step = grad.contiguous(), 1
    fn = getattr(_load(), f"gradsmith_mask_bwd_{_DTYPES[grad.dtype]}")
    fn(g.data_ptr(), step, bits.data_ptr(), out.data_ptr(), 0, n)
    return out
