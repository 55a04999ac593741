"""Native kernels of ``fused_add_relu``: one pass forward, one pass backward (private).

The torch composition reads and writes memory five times in the forward (add, relu, compare,
pack) and twice in the backward (unpack, multiply). Here the forward adds, clamps and packs
the mask (1 bit per element) in one pass, and the backward reads the gradient (in place when
it is one broadcast value, as ``loss.sum()``'s is) and the mask once. ``docs/ops.md`` has the
measurements.

The kernels run on plain dense CPU float32/float64 tensors of one shape. Everything else
(broadcasting, other dtypes or devices, vmap, torch.compile tracing, autocast, a backward
that must itself be differentiable) takes the torch path, which gives the same results.
``GRADSMITH_NATIVE=torch`` forces the torch path.

Threads: on Linux the kernels are built with OpenMP and split their work over torch's own
OpenMP workers (torch's wheels ship the libgomp they run on, and ours resolves to it), using
``torch.get_num_threads()`` of them, as torch's own elementwise ops do. Where that cannot be
arranged they run on the calling thread, and with more than one torch thread the forward's
add-and-clamp is torch's parallel ``add`` and ``relu_`` instead. Python threads were tried
and were slower: they compete with torch's OpenMP workers, which keep spinning for a while
after every torch op (``benchmarks/results/bench_targets_t2.md`` has the A/B).
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
/* GRADSMITH_PORTABLE builds only the portable loops, GRADSMITH_NO_AVX2 leaves out the AVX2
   ones: the tests build each variant and compare them. */
#if defined(__SSE2__) && !defined(GRADSMITH_PORTABLE)
#define SSE2 1
#include <emmintrin.h>
#endif
#if defined(__x86_64__) && defined(__GNUC__) && !defined(GRADSMITH_PORTABLE) \
    && !defined(GRADSMITH_NO_AVX2)
#include <immintrin.h>
/* float32 kernels also have an AVX2 version (8 floats per instruction), chosen at run time
   when the CPU has AVX2, so one build runs on every x86-64 CPU. */
#define AVX2_DISPATCH 1
#define AVX2 __attribute__((target("avx2")))
#endif
#if defined(_OPENMP)
#include <omp.h>
#endif

/* The mask is !(v <= 0): true for positive values and for NaN (a NaN output passes its
   gradient, as torch.relu's backward does), false for zeros and negatives. Bits are packed
   little-endian within each byte. Every [start, end) range starts on a byte (a multiple of 8).
   Each range kernel runs its widest loop first (AVX2, then SSE2, which every x86-64 CPU has),
   and the portable loop finishes the rest, with the same results on every CPU. */

/* Run CALL (which reads start and end) over [0, n): in one range, or, built with OpenMP and
   given more than one thread and at least GRAIN elements (torch's own grain size), in one
   contiguous range per thread of the OpenMP runtime that torch already runs (the same
   libgomp, so the same worker threads). Ranges are multiples of 64 elements: whole bytes of
   the mask and whole cache lines of it, so no two threads write the same byte. */
#define GRAIN 32768
#if defined(_OPENMP)
#define FOR_RANGES(n, nthreads, CALL)                                                         \
    do {                                                                                      \
        if ((nthreads) > 1 && (n) >= GRAIN) {                                                 \
            _Pragma("omp parallel num_threads(nthreads)")                                     \
            {                                                                                 \
                int64_t k_ = omp_get_num_threads(), t_ = omp_get_thread_num();                \
                int64_t per_ = (((n) + k_ - 1) / k_ + 63) & ~(int64_t)63;                     \
                int64_t start = t_ * per_, end = start + per_ < (n) ? start + per_ : (n);     \
                if (start < end) CALL;                                                        \
            }                                                                                 \
        } else {                                                                              \
            int64_t start = 0, end = (n);                                                     \
            CALL;                                                                             \
        }                                                                                     \
    } while (0)
#else
#define FOR_RANGES(n, nthreads, CALL)                                                         \
    do { int64_t start = 0, end = (n); (void)(nthreads); CALL; } while (0)
#endif

/* 1 when built with OpenMP (the kernels can split over threads), else 0. */
int gradsmith_openmp(void) {
#if defined(_OPENMP)
    return 1;
#else
    return 0;
#endif
}

#if defined(AVX2_DISPATCH)
/* The AVX2 loops: each does whole blocks of 8 from i and returns where it stopped. */
AVX2 static int64_t add_relu_f32_avx2(const float *x, const float *y, float *out,
                                      uint8_t *bits, int64_t b, int64_t end) {
    const __m256 zero = _mm256_setzero_ps();
    for (; b + 8 <= end; b += 8) {
        __m256 s = _mm256_add_ps(_mm256_loadu_ps(x + b), _mm256_loadu_ps(y + b));
        __m256 m = _mm256_cmp_ps(s, zero, _CMP_NLE_UQ);
        _mm256_storeu_ps(out + b, _mm256_and_ps(m, s));
        bits[b >> 3] = (uint8_t)_mm256_movemask_ps(m);
    }
    return b;
}

AVX2 static int64_t pack_positive_f32_avx2(const float *v, uint8_t *bits, int64_t b,
                                           int64_t end) {
    const __m256 zero = _mm256_setzero_ps();
    for (; b + 8 <= end; b += 8)
        bits[b >> 3] = (uint8_t)_mm256_movemask_ps(
            _mm256_cmp_ps(_mm256_loadu_ps(v + b), zero, _CMP_NLE_UQ));
    return b;
}

/* Each bit becomes a lane mask: broadcast the byte, keep bit j in lane j, compare. */
AVX2 static int64_t mask_bwd_f32_avx2(const float *g, int64_t g_step, const uint8_t *bits,
                                      float *out, int64_t b, int64_t end) {
    const __m256i sel = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    const __m256 one = _mm256_set1_ps(g[0]);
    for (; b + 8 <= end; b += 8) {
        __m256i v = _mm256_and_si256(_mm256_set1_epi32(bits[b >> 3]), sel);
        __m256 m = _mm256_castsi256_ps(_mm256_cmpeq_epi32(v, sel));
        _mm256_storeu_ps(out + b, _mm256_and_ps(g_step ? _mm256_loadu_ps(g + b) : one, m));
    }
    return b;
}
#define WITH_AVX2(CALL) if (__builtin_cpu_supports("avx2")) CALL
#else
#define WITH_AVX2(CALL)
#endif

/* out = relu(x + y) = (x + y) where the mask holds, else 0 (NaN propagates, -0 becomes 0),
   and the mask's bits, in one pass. */
static void add_relu_f32_range(const float *x, const float *y, float *out, uint8_t *bits,
                               int64_t start, int64_t end) {
    int64_t b = start;
    WITH_AVX2(b = add_relu_f32_avx2(x, y, out, bits, b, end));
#if defined(SSE2)
    const __m128 zero = _mm_setzero_ps();
    for (; b + 8 <= end; b += 8) {
        __m128 s0 = _mm_add_ps(_mm_loadu_ps(x + b), _mm_loadu_ps(y + b));
        __m128 s1 = _mm_add_ps(_mm_loadu_ps(x + b + 4), _mm_loadu_ps(y + b + 4));
        __m128 m0 = _mm_cmpnle_ps(s0, zero), m1 = _mm_cmpnle_ps(s1, zero);
        _mm_storeu_ps(out + b, _mm_and_ps(m0, s0));
        _mm_storeu_ps(out + b + 4, _mm_and_ps(m1, s1));
        bits[b >> 3] = (uint8_t)(_mm_movemask_ps(m0) | (_mm_movemask_ps(m1) << 4));
    }
#endif
    for (; b < end; b += 8) {
        uint8_t byte = 0;
        for (int64_t j = 0; j < 8 && b + j < end; j++) {
            float s = x[b + j] + y[b + j];
            int keep = !(s <= 0.0f);
            out[b + j] = keep ? s : 0.0f;
            byte |= (uint8_t)(keep << j);
        }
        bits[b >> 3] = byte;
    }
}

static void add_relu_f64_range(const double *x, const double *y, double *out, uint8_t *bits,
                               int64_t start, int64_t end) {
    int64_t b = start;
#if defined(SSE2)
    const __m128d zero = _mm_setzero_pd();
    for (; b + 8 <= end; b += 8) {
        int byte = 0;
        for (int k = 0; k < 8; k += 2) {
            __m128d s = _mm_add_pd(_mm_loadu_pd(x + b + k), _mm_loadu_pd(y + b + k));
            __m128d m = _mm_cmpnle_pd(s, zero);
            _mm_storeu_pd(out + b + k, _mm_and_pd(m, s));
            byte |= _mm_movemask_pd(m) << k;
        }
        bits[b >> 3] = (uint8_t)byte;
    }
#endif
    for (; b < end; b += 8) {
        uint8_t byte = 0;
        for (int64_t j = 0; j < 8 && b + j < end; j++) {
            double s = x[b + j] + y[b + j];
            int keep = !(s <= 0.0);
            out[b + j] = keep ? s : 0.0;
            byte |= (uint8_t)(keep << j);
        }
        bits[b >> 3] = byte;
    }
}

static void pack_positive_f32_range(const float *v, uint8_t *bits, int64_t start, int64_t end) {
    int64_t b = start;
    WITH_AVX2(b = pack_positive_f32_avx2(v, bits, b, end));
#if defined(SSE2)
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

static void pack_positive_f64_range(const double *v, uint8_t *bits, int64_t start, int64_t end) {
    int64_t b = start;
#if defined(SSE2)
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

/* out = g where the bit is set, else 0. g_step 0 reads one broadcast value, 1 a dense g.
   SSE2 turns each bit into a lane mask as AVX2 does, 4 floats or 2 doubles at a time (a
   double's mask is two 32-bit lanes testing the same bit). */
static void mask_bwd_f32_range(const float *g, int64_t g_step, const uint8_t *bits, float *out,
                               int64_t start, int64_t end) {
    int64_t b = start;
    WITH_AVX2(b = mask_bwd_f32_avx2(g, g_step, bits, out, b, end));
#if defined(SSE2)
    const __m128i lo = _mm_setr_epi32(1, 2, 4, 8), hi = _mm_setr_epi32(16, 32, 64, 128);
    const __m128 one = _mm_set1_ps(g[0]);
    for (; b + 8 <= end; b += 8) {
        __m128i v = _mm_set1_epi32(bits[b >> 3]);
        __m128 m0 = _mm_castsi128_ps(_mm_cmpeq_epi32(_mm_and_si128(v, lo), lo));
        __m128 m1 = _mm_castsi128_ps(_mm_cmpeq_epi32(_mm_and_si128(v, hi), hi));
        _mm_storeu_ps(out + b, _mm_and_ps(g_step ? _mm_loadu_ps(g + b) : one, m0));
        _mm_storeu_ps(out + b + 4, _mm_and_ps(g_step ? _mm_loadu_ps(g + b + 4) : one, m1));
    }
#endif
    for (int64_t i = b; i < end; i++)
        out[i] = ((bits[i >> 3] >> (i & 7)) & 1) ? g[i * g_step] : 0.0f;
}

static void mask_bwd_f64_range(const double *g, int64_t g_step, const uint8_t *bits,
                               double *out, int64_t start, int64_t end) {
    int64_t b = start;
#if defined(SSE2)
    const __m128d one = _mm_set1_pd(g[0]);
    for (; b + 8 <= end; b += 8) {
        __m128i v = _mm_set1_epi32(bits[b >> 3]);
        for (int k = 0; k < 4; k++) {
            __m128i sel = _mm_setr_epi32(1 << (2 * k), 1 << (2 * k), 2 << (2 * k), 2 << (2 * k));
            __m128d m = _mm_castsi128_pd(_mm_cmpeq_epi32(_mm_and_si128(v, sel), sel));
            _mm_storeu_pd(out + b + 2 * k,
                          _mm_and_pd(g_step ? _mm_loadu_pd(g + b + 2 * k) : one, m));
        }
    }
#endif
    for (int64_t i = b; i < end; i++)
        out[i] = ((bits[i >> 3] >> (i & 7)) & 1) ? g[i * g_step] : 0.0;
}

/* The exported kernels: each runs its range kernel over [0, n) on up to nthreads threads. */
#define DEFINE_PARALLEL(T, SUFFIX)                                                            \
void gradsmith_add_relu_##SUFFIX(const T *x, const T *y, T *out, uint8_t *bits, int64_t n,   \
                                 int nthreads) {                                              \
    FOR_RANGES(n, nthreads, add_relu_##SUFFIX##_range(x, y, out, bits, start, end));          \
}                                                                                             \
void gradsmith_pack_positive_##SUFFIX(const T *v, uint8_t *bits, int64_t n, int nthreads) {   \
    FOR_RANGES(n, nthreads, pack_positive_##SUFFIX##_range(v, bits, start, end));             \
}                                                                                             \
void gradsmith_mask_bwd_##SUFFIX(const T *g, int64_t g_step, const uint8_t *bits, T *out,     \
                                 int64_t n, int nthreads) {                                   \
    FOR_RANGES(n, nthreads, mask_bwd_##SUFFIX##_range(g, g_step, bits, out, start, end));     \
}

DEFINE_PARALLEL(float, f32)
DEFINE_PARALLEL(double, f64)
"""

_I64, _PTR, _INT = ctypes.c_int64, ctypes.c_void_p, ctypes.c_int
_SIGNATURES = {
    "gradsmith_add_relu": [_PTR, _PTR, _PTR, _PTR, _I64, _INT],
    "gradsmith_pack_positive": [_PTR, _PTR, _I64, _INT],
    "gradsmith_mask_bwd": [_PTR, _I64, _PTR, _PTR, _I64, _INT],
}
_DTYPES = {torch.float32: "f32", torch.float64: "f64"}

_LOCK = threading.Lock()
_STATE: dict[str, object] = {}


def _openmp_runtimes() -> set[str]:
    """The OpenMP runtime libraries mapped into this process (Linux; empty elsewhere)."""
    try:
        with open("/proc/self/maps") as maps:
            return {line.split()[-1] for line in maps if "libgomp" in line}
    except OSError:
        return set()


def _open() -> ctypes.CDLL:
    """The kernels, built with OpenMP when they would share torch's own OpenMP runtime.

    torch's Linux wheels run their parallel ops on a libgomp they ship, and the dynamic loader
    resolves our library's libgomp to that one (same soname), so the kernels' threads are
    torch's own workers. Anywhere else (another runtime, a failed OpenMP build, a second
    libgomp appearing) the kernels run on one thread: two thread pools on the same cores
    would compete, which measured slower than one thread.
    """
    runtimes = _openmp_runtimes()
    if len(runtimes) == 1:
        try:
            lib = open_library("fused", _SOURCE, ("-fopenmp",))
            _STATE["threads"] = _openmp_runtimes() == runtimes and lib.gradsmith_openmp() == 1
            return lib
        except NativeUnavailable:
            pass
    _STATE["threads"] = False
    return open_library("fused", _SOURCE)


def _threads() -> int:
    """How many threads the kernels may use: torch's count, or 1 (see :func:`_open`)."""
    return torch.get_num_threads() if _STATE.get("threads") else 1


def _bind(lib: ctypes.CDLL) -> ctypes.CDLL:
    """Declare the kernels' argument types (ctypes would otherwise pass ints as C ints)."""
    for name, argtypes in _SIGNATURES.items():
        for suffix in _DTYPES.values():
            fn = getattr(lib, f"{name}_{suffix}")
            fn.argtypes, fn.restype = argtypes, None
    return lib


def _load() -> ctypes.CDLL | None:
    if os.environ.get("GRADSMITH_NATIVE", "auto") == "torch":
        return None
    with _LOCK:
        if "lib" not in _STATE:
            try:
                _STATE["lib"] = _bind(_open())
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


def add_relu(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``relu(x + y)`` and its bit-packed mask, in one pass, for same-shape tensors (see
    :func:`usable`)."""
    if torch.get_num_threads() > 1 and not _STATE.get("threads"):
        out = torch.add(x, y).relu_()  # torch's parallel add beats one native thread
        return out, pack_positive(out)
    x, y = x.contiguous(), y.contiguous()
    out = torch.empty_like(x, memory_format=torch.contiguous_format)
    bits = torch.empty((x.numel() + 7) // 8, dtype=torch.uint8)
    fn = getattr(_load(), f"gradsmith_add_relu_{_DTYPES[x.dtype]}")
    fn(x.data_ptr(), y.data_ptr(), out.data_ptr(), bits.data_ptr(), x.numel(), _threads())
    return out, bits


def pack_positive(v: torch.Tensor) -> torch.Tensor:
    """The bit-packed mask of ``~(v <= 0)`` in one pass (the layout of ``_bitmask.pack_mask``)."""
    v = v.contiguous()
    bits = torch.empty((v.numel() + 7) // 8, dtype=torch.uint8)
    fn = getattr(_load(), f"gradsmith_pack_positive_{_DTYPES[v.dtype]}")
    fn(v.data_ptr(), bits.data_ptr(), v.numel(), _threads())
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
    fn(g.data_ptr(), step, bits.data_ptr(), out.data_ptr(), n, _threads())
    return out
