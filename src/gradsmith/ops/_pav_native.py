"""Optional native sort and pool-adjacent-violators: a small C kernel built once with the system
compiler.

PAV is a sequential stack algorithm; the vectorised torch solver (``_pav``) pays ~5 us of
dispatch per tensor op and cannot match a compiled loop at n <= 10,000 (see docs/ops-sort-quant.md
for measurements). When a C compiler is available, this module compiles the kernel below (plain
C, no torch headers: about 0.2 s, unlike ``torch.utils.cpp_extension``), caches the shared library
under ``$XDG_CACHE_HOME/gradsmith`` (or ``~/.cache/gradsmith``) keyed by a hash of the source, and
calls it through ctypes on contiguous float32/float64 buffers (accumulating in double). The same
kernel holds a radix argsort (``torch.sort``'s order, 2-4x faster on short rows) and the
backward's block reductions.

Anything unusual (no compiler, a read-only cache, a failed load) makes :func:`load` return
``None`` and the caller falls back to the torch solver, which gives the same results.
Set ``GRADSMITH_PAV=torch`` to force the fallback, ``GRADSMITH_PAV=native`` to make a failed
build raise instead.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import torch

__all__ = ["load", "solve_l2", "solve_kl", "block_mean", "block_softmax_sum", "argsort_desc", "torch_solver", "backend"]

_SOURCE = r"""
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Decreasing isotonic fit of each row, pooling on equality like torchsort. Reads and writes the
   caller's dtype (float or double), accumulates in double. Block ids are row-local (each row's
   first block is 0). Returns 0, or -1 if out of memory. */

/* log(exp(m1) s1 + exp(m2) s2) kept as (m, s) with m the larger exponent: one exp per merge,
   and the block value needs one log, instead of a log-add-exp (exp and log1p) per statistic. */
static void lse_merge(double *m1, double *s1, double m2, double s2) {
    if (*m1 >= m2) { if (m2 != *m1) s2 *= exp(m2 - *m1); *s1 += s2; }
    else { *s1 = *s1 * exp(*m1 - m2) + s2; *m1 = m2; }
}

/* l2: p, q are the block's sum and count. kl: p, q are the maxima of y and w over the block and
   ps, qs the sums of exp(y - p) and exp(w - q). v: block value, kept so each comparison is a
   load, not a division or a log. */
#define DEFINE_PAV(T, NAME, KL)                                                               \
static int64_t NAME(const T *y, const T *w, int64_t rows, int64_t n, T *sol,                 \
                    int64_t *block) {                                                         \
    double *p = malloc(sizeof(double) * n), *q = malloc(sizeof(double) * n);                  \
    double *v = malloc(sizeof(double) * n);                                                   \
    double *ps = KL ? malloc(sizeof(double) * n) : 0, *qs = KL ? malloc(sizeof(double) * n) : 0; \
    int64_t *start = malloc(sizeof(int64_t) * (n + 1));                                       \
    if (!p || !q || !v || !start || (KL && (!ps || !qs))) {                                   \
        free(p); free(q); free(v); free(start); free(ps); free(qs); return -1;                \
    }                                                                                         \
    for (int64_t r = 0; r < rows; r++) {                                                      \
        const T *yr = y + r * n;                                                              \
        int64_t nb = 0;                                                                       \
        for (int64_t i = 0; i < n; i++) {                                                     \
            p[nb] = yr[i]; start[nb] = i;                                                     \
            if (KL) { q[nb] = w[r * n + i]; ps[nb] = qs[nb] = 1.0; v[nb] = p[nb] - q[nb]; }   \
            else { q[nb] = 1.0; v[nb] = p[nb]; }                                              \
            nb++;                                                                             \
            while (nb > 1 && v[nb - 2] <= v[nb - 1]) {                                        \
                if (KL) { lse_merge(&p[nb - 2], &ps[nb - 2], p[nb - 1], ps[nb - 1]);          \
                          lse_merge(&q[nb - 2], &qs[nb - 2], q[nb - 1], qs[nb - 1]);          \
                          v[nb - 2] = p[nb - 2] - q[nb - 2] + log(ps[nb - 2] / qs[nb - 2]); } \
                else { p[nb - 2] += p[nb - 1]; q[nb - 2] += q[nb - 1];                        \
                       v[nb - 2] = p[nb - 2] / q[nb - 2]; }                                   \
                nb--;                                                                         \
            }                                                                                 \
        }                                                                                     \
        start[nb] = n;                                                                        \
        for (int64_t b = 0; b < nb; b++) {                                                    \
            T value = (T)v[b];                                                                \
            for (int64_t j = start[b]; j < start[b + 1]; j++) {                               \
                sol[r * n + j] = value; block[r * n + j] = b;                                 \
            }                                                                                 \
        }                                                                                     \
    }                                                                                         \
    free(p); free(q); free(v); free(start); free(ps); free(qs);                               \
    return 0;                                                                                 \
}

DEFINE_PAV(double, pav_l2_f64, 0)
DEFINE_PAV(double, pav_kl_f64, 1)
DEFINE_PAV(float, pav_l2_f32, 0)
DEFINE_PAV(float, pav_kl_f32, 1)

/* Mean of g over each run of equal (row-local) block ids: the l2 backward. */
#define DEFINE_BLOCK_MEAN(T, NAME)                                                            \
int64_t NAME(const T *g, const int64_t *block, int64_t rows, int64_t n, T *out) {            \
    for (int64_t r = 0; r < rows; r++) {                                                      \
        const T *gr = g + r * n; const int64_t *br = block + r * n; T *o = out + r * n;       \
        int64_t i = 0;                                                                        \
        while (i < n) {                                                                       \
            int64_t j = i; double sum = 0.0;                                                  \
            while (j < n && br[j] == br[i]) { sum += gr[j]; j++; }                            \
            T mean = (T)(sum / (double)(j - i));                                              \
            for (int64_t k = i; k < j; k++) o[k] = mean;                                      \
            i = j;                                                                            \
        }                                                                                     \
    }                                                                                         \
    return 0;                                                                                 \
}

DEFINE_BLOCK_MEAN(double, gradsmith_block_mean_f64)
DEFINE_BLOCK_MEAN(float, gradsmith_block_mean_f32)

/* softmax(s) within each run of equal block ids times the run's sum of g: the kl backward.
   Returns 0, or -1 if out of memory. */
#define DEFINE_BLOCK_SOFTMAX_SUM(T, NAME)                                                     \
int64_t NAME(const T *s, const T *g, const int64_t *block, int64_t rows, int64_t n, T *out) {\
    double *e = malloc(sizeof(double) * n);                                                   \
    if (!e) return -1;                                                                        \
    for (int64_t r = 0; r < rows; r++) {                                                      \
        const T *sr = s + r * n, *gr = g + r * n; const int64_t *br = block + r * n;          \
        T *o = out + r * n;                                                                   \
        int64_t i = 0;                                                                        \
        while (i < n) {                                                                       \
            int64_t j = i; double top = -INFINITY, gsum = 0.0, z = 0.0;                       \
            while (j < n && br[j] == br[i]) {                                                 \
                if (sr[j] > top) top = sr[j];                                                 \
                gsum += gr[j]; j++;                                                           \
            }                                                                                 \
            for (int64_t k = i; k < j; k++) { e[k] = exp(sr[k] - top); z += e[k]; }           \
            for (int64_t k = i; k < j; k++) o[k] = (T)(e[k] / z * gsum);                      \
            i = j;                                                                            \
        }                                                                                     \
    }                                                                                         \
    free(e);                                                                                  \
    return 0;                                                                                 \
}

DEFINE_BLOCK_SOFTMAX_SUM(double, gradsmith_block_softmax_sum_f64)
DEFINE_BLOCK_SOFTMAX_SUM(float, gradsmith_block_softmax_sum_f32)

/* Stable descending argsort of each row by LSD radix sort (8-bit digits, a digit shared by the
   whole row skipped) on order-preserving unsigned keys. -0.0 sorts as +0.0 and every NaN as the
   largest value, as torch.sort does. perm is row-local. Returns 0, or -1 if out of memory. */
#define DEFINE_ARGSORT(T, U, NAME)                                                            \
int64_t NAME(const T *x, int64_t rows, int64_t n, int64_t *perm) {                           \
    const int bits = 8 * (int)sizeof(U);                                                      \
    U *key = malloc(sizeof(U) * n), *key2 = malloc(sizeof(U) * n);                            \
    int64_t *idx2 = malloc(sizeof(int64_t) * n);                                              \
    if (!key || !key2 || !idx2) { free(key); free(key2); free(idx2); return -1; }             \
    for (int64_t r = 0; r < rows; r++) {                                                      \
        const T *xr = x + r * n;                                                              \
        U *k = key, *k2 = key2;                                                               \
        int64_t *idx = perm + r * n, *i2 = idx2;                                              \
        for (int64_t i = 0; i < n; i++) {                                                     \
            T v = xr[i] + (T)0;                                                               \
            U u;                                                                              \
            if (v != v) v = (T)NAN;                                                           \
            memcpy(&u, &v, sizeof u);                                                         \
            u = (u >> (bits - 1)) ? ~u : (u | ((U)1 << (bits - 1)));                          \
            k[i] = ~u; /* descending */                                                       \
            idx[i] = i;                                                                       \
        }                                                                                     \
        for (int shift = 0; shift < bits; shift += 8) {                                       \
            int64_t count[257] = {0};                                                         \
            for (int64_t i = 0; i < n; i++) count[((k[i] >> shift) & 255) + 1]++;             \
            int skip = 0;                                                                     \
            for (int d = 1; d <= 256; d++) {                                                  \
                if (count[d] == n) skip = 1;                                                  \
                count[d] += count[d - 1];                                                     \
            }                                                                                 \
            if (skip) continue;                                                               \
            for (int64_t i = 0; i < n; i++) {                                                 \
                int64_t at = count[(k[i] >> shift) & 255]++;                                  \
                k2[at] = k[i]; i2[at] = idx[i];                                               \
            }                                                                                 \
            U *tk = k; k = k2; k2 = tk;                                                       \
            int64_t *ti = idx; idx = i2; i2 = ti;                                             \
        }                                                                                     \
        /* after an odd number of passes the order sits in the scratch buffer */             \
        if (idx != perm + r * n) memcpy(perm + r * n, idx, sizeof(int64_t) * n);              \
    }                                                                                         \
    free(key); free(key2); free(idx2);                                                        \
    return 0;                                                                                 \
}
DEFINE_ARGSORT(float, uint32_t, gradsmith_argsort_desc_f32)
DEFINE_ARGSORT(double, uint64_t, gradsmith_argsort_desc_f64)

int64_t gradsmith_pav_l2_f64(const double *y, int64_t rows, int64_t n, double *sol,
                             int64_t *block) { return pav_l2_f64(y, 0, rows, n, sol, block); }
int64_t gradsmith_pav_kl_f64(const double *y, const double *w, int64_t rows, int64_t n,
                             double *sol, int64_t *block) {
    return pav_kl_f64(y, w, rows, n, sol, block); }
int64_t gradsmith_pav_l2_f32(const float *y, int64_t rows, int64_t n, float *sol,
                             int64_t *block) { return pav_l2_f32(y, 0, rows, n, sol, block); }
int64_t gradsmith_pav_kl_f32(const float *y, const float *w, int64_t rows, int64_t n,
                             float *sol, int64_t *block) {
    return pav_kl_f32(y, w, rows, n, sol, block); }
"""

_LOCK = threading.Lock()
_STATE: dict[str, object] = {}


def _cache_dir() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "gradsmith"


def _build(target: Path) -> None:
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise RuntimeError("no C compiler found (set CC or install gcc/clang)")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        src = Path(tmp) / "pav.c"
        src.write_text(_SOURCE)
        out = Path(tmp) / target.name
        subprocess.run([compiler, "-O3", "-shared", "-fPIC", "-o", str(out), str(src), "-lm"],
                       check=True, capture_output=True, timeout=120)
        os.replace(out, target)  # atomic: concurrent builders never see a partial library


def _open() -> ctypes.CDLL:
    digest = hashlib.sha256(_SOURCE.encode()).hexdigest()[:16]
    target = _cache_dir() / f"pav-{digest}.so"
    if not target.exists():
        _build(target)
    lib = ctypes.CDLL(str(target))
    for name, argtypes in _SIGNATURES.items():
        for suffix in ("f32", "f64"):
            fn = getattr(lib, f"{name}_{suffix}")
            fn.argtypes, fn.restype = argtypes, ctypes.c_int64
    return lib


_I64, _PTR = ctypes.c_int64, ctypes.c_void_p
# Every exported function exists in an _f32 and an _f64 variant and returns 0, or -1 if out of
# memory; the sizes (rows, n) follow the input pointers.
_SIGNATURES = {
    "gradsmith_pav_l2": [_PTR, _I64, _I64, _PTR, _PTR],
    "gradsmith_pav_kl": [_PTR, _PTR, _I64, _I64, _PTR, _PTR],
    "gradsmith_block_mean": [_PTR, _PTR, _I64, _I64, _PTR],
    "gradsmith_block_softmax_sum": [_PTR, _PTR, _PTR, _I64, _I64, _PTR],
    "gradsmith_argsort_desc": [_PTR, _I64, _I64, _PTR],
}


def _call(lib: ctypes.CDLL, name: str, dtype: torch.dtype, *args: int) -> None:
    """Run the float32 or float64 variant of ``name``; pointers are ``data_ptr()`` values."""
    fn = getattr(lib, f"{name}_{'f32' if dtype == torch.float32 else 'f64'}")
    if fn(*args) < 0:
        raise MemoryError(f"gradsmith native kernel {name}: out of memory")


_FORCE_TORCH = threading.local()


@contextlib.contextmanager
def torch_solver() -> Iterator[None]:
    """Use the vectorised torch solver in this thread (benchmarks and tests of the fallback).

    Example:
        >>> with torch_solver():
        ...     backend()
        'torch'
    """
    previous = getattr(_FORCE_TORCH, "on", False)
    _FORCE_TORCH.on = True
    try:
        yield
    finally:
        _FORCE_TORCH.on = previous


def backend() -> str:
    """``"native"`` or ``"torch"``: the solver the next CPU call will use."""
    return "native" if load() is not None else "torch"


def load() -> ctypes.CDLL | None:
    """The native kernel, built on first use; ``None`` when unavailable (torch fallback)."""
    mode = os.environ.get("GRADSMITH_PAV", "auto")
    if mode == "torch" or getattr(_FORCE_TORCH, "on", False):
        return None
    with _LOCK:
        if "lib" not in _STATE:
            try:
                _STATE["lib"] = _open()
            except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
                if mode == "native":
                    raise RuntimeError(
                        f"GRADSMITH_PAV=native but the PAV kernel failed: {exc}") from exc
                _STATE["lib"] = None
        return _STATE["lib"]  # type: ignore[return-value]


def _run(lib: ctypes.CDLL, name: str, *inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    rows, n = inputs[0].shape
    dtype = inputs[0].dtype if inputs[0].dtype in (torch.float32, torch.float64) else torch.float64
    buffers = [t.detach().to(dtype=dtype, device="cpu").contiguous() for t in inputs]
    sol = torch.empty((rows, n), dtype=dtype)
    block = torch.empty((rows, n), dtype=torch.int64)
    _call(lib, name, dtype, *[b.data_ptr() for b in buffers], rows, n, sol.data_ptr(),
          block.data_ptr())
    return sol, block


def solve_l2(lib: ctypes.CDLL, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Native :func:`gradsmith.ops._isotonic.isotonic_l2` (solution in y's dtype, local blocks)."""
    return _run(lib, "gradsmith_pav_l2", y)


def solve_kl(lib: ctypes.CDLL, y: torch.Tensor,
             w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Native :func:`gradsmith.ops._isotonic.isotonic_kl` (solution in y's dtype, local blocks)."""
    return _run(lib, "gradsmith_pav_kl", y, w)


def block_mean(lib: ctypes.CDLL, g: torch.Tensor, block: torch.Tensor) -> torch.Tensor:
    """Native block mean of a float32/float64 CPU ``g`` (rows, n) over row-local ``block`` runs.

    Not differentiable: callers use it only when no graph is being built.
    """
    rows, n = g.shape
    g = g.contiguous()
    block = block.contiguous()
    out = torch.empty_like(g)
    _call(lib, "gradsmith_block_mean", g.dtype, g.data_ptr(), block.data_ptr(), rows, n,
          out.data_ptr())
    return out


def block_softmax_sum(lib: ctypes.CDLL, s: torch.Tensor, g: torch.Tensor,
                      block: torch.Tensor) -> torch.Tensor:
    """Native ``softmax_B(s) * sum_B(g)`` over row-local ``block`` runs (the kl backward).

    Not differentiable: callers use it only when no graph is being built.
    """
    rows, n = s.shape
    s, g, block = s.contiguous(), g.to(s.dtype).contiguous(), block.contiguous()
    out = torch.empty_like(s)
    _call(lib, "gradsmith_block_softmax_sum", s.dtype, s.data_ptr(), g.data_ptr(),
          block.data_ptr(), rows, n, out.data_ptr())
    return out


def argsort_desc(lib: ctypes.CDLL, x: torch.Tensor) -> torch.Tensor:
    """Stable descending argsort of each row of a float32/float64 CPU ``x`` (rows, n).

    The order of ``torch.sort(x, descending=True, stable=True)`` (``-0.0`` ties ``+0.0``, NaN is
    the largest), by radix sort: 2-4x faster than ``torch.sort`` at 8 x 1,000 on this CPU, where
    the sort was most of soft_rank's time (benchmarks/sort_quant_sweep.py).
    """
    rows, n = x.shape
    x = x.detach().contiguous()
    perm = torch.empty((rows, n), dtype=torch.int64)
    _call(lib, "gradsmith_argsort_desc", x.dtype, x.data_ptr(), rows, n, perm.data_ptr())
    return perm
