"""Triton kernels run on a CPU-only machine with no configuration: the interpreter is switched
on before user code loads, and the shims close the interpreter's gaps real kernels hit."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import triton.language as tl

import triton
from gradsmith._triton import interpreting, status
from gradsmith._triton.shims import TESTED

HERE = Path(__file__).parent
ROOT = HERE.parents[1]

pytestmark = pytest.mark.skipif(torch.cuda.is_available(),
                                reason="a GPU runs kernels compiled, not interpreted")


def test_interpreter_is_on_and_every_gap_of_this_triton_is_shimmed():
    assert interpreting()
    info = status()
    assert info["triton"] == triton.__version__
    assert set(info["shims"]) == {"float-args", "libdevice", "autotune", "imported-early",
                                  "bounds", "device-queries", "bf16-casts"}
    assert all(state in ("applied", "not needed") for state in info["shims"].values())
    if triton.__version__ in TESTED:  # the gaps this version is known to have
        assert {info["shims"][k] for k in ("float-args", "libdevice", "autotune")} == {
            "applied"}


@triton.jit
def _float_arg(x_ptr, y_ptr, alpha, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) * alpha.to(tl.float32), mask=m)


def test_float_scalar_argument_behaves_as_compiled_triton_fp32():
    x = torch.randn(10)
    y = torch.empty(10)
    _float_arg[(1,)](x, y, 0.1, 10, BLOCK=16)
    torch.testing.assert_close(y, x * torch.tensor(0.1, dtype=torch.float32))


@triton.jit
def _libdevice(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    from triton.language.extra import libdevice

    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = libdevice.tanh(x) + libdevice.rsqrt(x * x + 1.0) + libdevice.pow(x, 2.0)
    tl.store(y_ptr + offs, y, mask=m)


def test_libdevice_functions_compute_instead_of_returning_none():
    x = torch.randn(10, dtype=torch.float64)
    y = torch.empty_like(x)
    _libdevice[(1,)](x, y, 10, BLOCK=16)
    torch.testing.assert_close(y, torch.tanh(x) + torch.rsqrt(x * x + 1) + x * x)


@triton.autotune(configs=[triton.Config({"BLOCK": 8}), triton.Config({"BLOCK": 32})],
                 key=["n"])
@triton.jit
def _tuned(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) * 3, mask=m)


def test_autotuned_kernel_runs_without_a_gpu_driver():
    x = torch.randn(20)
    y = torch.empty(20)
    _tuned[lambda meta: (triton.cdiv(20, meta["BLOCK"]),)](x, y, 20)
    torch.testing.assert_close(y, 3 * x)


def test_cli_checks_a_triton_function_with_no_configuration(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, "-m", "gradsmith", "check", f"{HERE / 'kernels.py'}::Gelu",
         "--no-compat", "--format", "json", "--jobs", "1"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    doc = json.loads(proc.stdout)
    (row,) = doc["results"]
    assert row["verdict"] == "pass", row
    codes = {f["code"]: f for f in row["report"]["findings"]}
    assert "triton-interpreted" in codes
    assert codes["triton-interpreted"]["details"]["launches"] > 0


@triton.jit
def _via_bf16(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(y_ptr + offs, x.to(tl.bfloat16).to(tl.float64), mask=m)


def test_bfloat16_casts_to_and_from_float64_round_like_torch():
    x = torch.randn(10, dtype=torch.float64)
    y = torch.empty_like(x)
    _via_bf16[(1,)](x, y, 10, BLOCK=16)
    # float64 -> float32 -> bfloat16 -> float64 as torch does it, within one bfloat16 step
    # (the interpreter's float32 -> bfloat16 conversion truncates where torch rounds)
    torch.testing.assert_close(y, x.float().bfloat16().double(), atol=0, rtol=2.0 ** -7)
