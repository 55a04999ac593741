"""Native kernels: compiled at first use (ctypes) or built at install time (a C extension)?

Measures what the choice changes, on this machine:

- first-use latency: a fresh process calling soft_rank with an empty kernel cache (compile +
  load + the call) against the same with the cache warm, and the fused_add_relu kernel's build;
- call overhead: one ctypes call into the cached library against one call into a CPython
  extension module exposing the same C function (built here with the same compiler, as an
  install-time build would), on a 1-element input, and soft_rank's own time at 8 x 1,000;
- ``torch.utils.cpp_extension.load`` (the torch-extension route) compile time, once.

    python benchmarks/native_build.py [--no-torch-extension]

Writes benchmarks/results/native_build.{json,md}. Install friction and failure modes are
discussed in docs/ops-sort-quant.md ("Native kernels: built at first use").
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"

_FIRST_CALL = textwrap.dedent("""
    import time, torch
    t0 = time.perf_counter()
    import gradsmith.functional as G
    x = torch.randn(8, 1000)
    t1 = time.perf_counter()
    G.soft_rank(x)
    t2 = time.perf_counter()
    from gradsmith.ops._pav_native import backend
    print(t1 - t0, t2 - t1, backend())
""")

_EXTENSION = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
int64_t gradsmith_block_mean_f64(const double *, const int64_t *, int64_t, int64_t, double *);
static PyObject *block_mean(PyObject *self, PyObject *args) {
    unsigned long long g, block, out; long long rows, n;
    if (!PyArg_ParseTuple(args, "KKLLK", &g, &block, &rows, &n, &out)) return NULL;
    return PyLong_FromLongLong(gradsmith_block_mean_f64((const double *)g,
        (const int64_t *)block, rows, n, (double *)out));
}
static PyMethodDef methods[] = {{"block_mean", block_mean, METH_VARARGS, ""}, {0}};
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "gsext", 0, -1, methods};
PyMODINIT_FUNC PyInit_gsext(void) { return PyModule_Create(&mod); }
"""

_TORCH_EXT = """
#include <torch/extension.h>
torch::Tensor twice(torch::Tensor x) { return x * 2; }
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("twice", &twice); }
"""


def _fresh_process(cache: str) -> tuple[float, float, str]:
    env = dict(os.environ, XDG_CACHE_HOME=cache)
    out = subprocess.run([sys.executable, "-c", _FIRST_CALL], env=env, capture_output=True,
                         text=True, check=True, timeout=300).stdout.split()
    return float(out[0]), float(out[1]), out[2]


def first_use(rounds: int) -> dict:
    cold, warm = [], []
    for _ in range(rounds):
        with tempfile.TemporaryDirectory() as cache:
            cold.append(_fresh_process(cache))
            warm.append(_fresh_process(cache))
    return {"cold_first_call_s": statistics.median(c[1] for c in cold),
            "warm_first_call_s": statistics.median(w[1] for w in warm),
            "import_s": statistics.median(w[0] for w in warm),
            "backend": cold[0][2]}


def fused_build() -> float:
    from gradsmith.ops import _fused_native

    with tempfile.TemporaryDirectory() as cache:
        os.environ["XDG_CACHE_HOME"] = cache
        try:
            start = time.perf_counter()
            _fused_native._open()  # the build the op makes (with OpenMP where it applies)
            return time.perf_counter() - start
        finally:
            del os.environ["XDG_CACHE_HOME"]


def _per_call(fn, calls: int = 20000) -> float:
    for _ in range(100):
        fn()
    runs = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        runs.append((time.perf_counter() - start) / calls)
    return statistics.median(runs)


def call_overhead() -> dict:
    import torch

    import gradsmith.functional as G
    from gradsmith.ops import _pav_native

    lib = _pav_native.load()
    g = torch.ones(1, 1, dtype=torch.float64)
    block = torch.zeros(1, 1, dtype=torch.int64)
    out = torch.empty_like(g)
    args = (g.data_ptr(), block.data_ptr(), 1, 1, out.data_ptr())
    fn = lib.gradsmith_block_mean_f64
    ctypes_s = _per_call(lambda: fn(*args))
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "gsext.c"
        src.write_text(_EXTENSION)
        so = Path(tmp) / f"gsext{sysconfig.get_config_var('EXT_SUFFIX')}"
        kernel = Path(tmp) / "kernel.c"
        kernel.write_text(_pav_native._SOURCE)
        start = time.perf_counter()
        subprocess.run(["cc", "-O3", "-shared", "-fPIC", f"-I{sysconfig.get_paths()['include']}",
                        "-o", str(so), str(src), str(kernel), "-lm"], check=True, timeout=300)
        ext_build = time.perf_counter() - start
        sys.path.insert(0, tmp)
        import gsext

        ext_s = _per_call(lambda: gsext.block_mean(*args))
    x = torch.randn(8, 1000)
    soft_rank_s = _per_call(lambda: G.soft_rank(x), calls=200)
    return {"ctypes_call_us": ctypes_s * 1e6, "extension_call_us": ext_s * 1e6,
            "extension_build_s": ext_build, "soft_rank_8x1000_us": soft_rank_s * 1e6}


def torch_extension() -> float | None:
    from torch.utils.cpp_extension import load_inline

    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        try:
            load_inline("gs_twice", _TORCH_EXT, functions=None, build_directory=tmp,
                        verbose=False)
        except Exception as exc:  # no ninja / compiler: record why
            return f"failed: {type(exc).__name__}: {str(exc)[:200]}"
        return time.perf_counter() - start


def main() -> None:
    from gradsmith.bench import environment
    from gradsmith.bench.report import write_results

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-torch-extension", action="store_true")
    ns = parser.parse_args()
    data = {"environment": environment(), "first_use": first_use(ns.rounds),
            "fused_kernel_build_s": fused_build(), "calls": call_overhead()}
    if not ns.no_torch_extension:
        data["torch_cpp_extension_build_s"] = torch_extension()
    data["load_average_1min_end"] = round(os.getloadavg()[0], 2)
    f, c = data["first_use"], data["calls"]
    md = "\n".join([
        "# Native kernels: first-use build (ctypes) vs an install-time extension", "",
        f"Environment: torch {data['environment']['torch']}, {data['environment']['cpu']}, "
        f"{data['environment']['torch_threads']} threads, load "
        f"{data['environment']['load_average_1min']} -> {data['load_average_1min_end']}, "
        f"{data['environment']['date_utc']}; `python benchmarks/native_build.py`.", "",
        "| what | value |", "|---|---|",
        f"| soft_rank 8x1000, first call in a fresh process, empty cache (compile + load) | "
        f"{f['cold_first_call_s'] * 1e3:.0f} ms |",
        f"| the same with the kernel cached | {f['warm_first_call_s'] * 1e3:.0f} ms |",
        f"| import gradsmith.functional + torch tensors (for scale) | {f['import_s'] * 1e3:.0f} ms |",
        f"| fused_add_relu kernel build | {data['fused_kernel_build_s'] * 1e3:.0f} ms |",
        f"| one ctypes call (1-element block mean) | {c['ctypes_call_us']:.2f} us |",
        f"| one call into a CPython extension (same C function) | "
        f"{c['extension_call_us']:.2f} us |",
        f"| building that extension (what an install-time build costs) | "
        f"{c['extension_build_s'] * 1e3:.0f} ms |",
        f"| soft_rank 8x1000, whole call | {c['soft_rank_8x1000_us']:.0f} us |",
        f"| torch.utils.cpp_extension.load_inline (torch headers, ninja) | "
        f"{data.get('torch_cpp_extension_build_s')} s |", ""])
    print(md)
    write_results(data, md, RESULTS, "native_build")


if __name__ == "__main__":
    main()
