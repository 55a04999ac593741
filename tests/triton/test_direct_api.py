"""``gradsmith.check(Fn, ...)`` from user code that imported its Triton kernels first (compiled
for a GPU, none here): the kernels run interpreted with no call to prepare(); where that
cannot be done, the finding says what to do."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest
import torch

from gradsmith.checker.explain import explain

pytestmark = pytest.mark.skipif(torch.cuda.is_available(),
                                reason="a GPU runs kernels compiled, not interpreted")

# A user's script: kernels (one autotuned, one with a float argument) imported before gradsmith.
SCRIPT = '''
import torch, triton, triton.language as tl
from torch.autograd.function import once_differentiable


@triton.jit
def _scale(x_ptr, y_ptr, n, c, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(y_ptr + offs, x * c.to(tl.float32), mask=offs < n)


@triton.autotune(configs=[triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 64})], key=["n"])
@triton.jit
def _scale_tuned(x_ptr, y_ptr, n, c, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(y_ptr + offs, x * c.to(tl.float32), mask=offs < n)


class Triple(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _scale[(triton.cdiv(x.numel(), 32),)](x, y, x.numel(), 3.0, BLOCK=32)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        g = g.contiguous()
        dx = torch.empty_like(g)
        _scale_tuned[lambda m: (triton.cdiv(g.numel(), m["BLOCK"]),)](g, dx, g.numel(), 3.0)
        return dx


import gradsmith

report = gradsmith.check(Triple, torch.randn(7, dtype=torch.float64, requires_grad=True))
print("PASSED" if report.passed else report.format())
print(sorted(report.codes()))
'''


def test_kernels_imported_before_gradsmith_run_interpreted(tmp_path):
    script = tmp_path / "user.py"
    script.write_text(textwrap.dedent(SCRIPT))
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # the group this test created
            proc.wait()
    assert out.startswith("PASSED"), out + err
    assert "triton-interpreted" in out


def test_a_launch_without_a_driver_says_what_to_do():
    exc = RuntimeError("0 active drivers ([]). There should only be one.")
    known = explain(exc, "forward")
    assert known is not None and known.key == "triton-no-driver"
    assert "gradsmith._triton.prepare()" in known.fix and "gradsmith check" in known.fix
