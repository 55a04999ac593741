"""A Function whose Triton kernels run in the interpreter gets INTERPRETED_SCALE times
--timeout (interpreted kernels are 20-500x slower), and a row that still runs out of time says
the limit it had and why."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest
import torch

from gradsmith.isolation import worker
from gradsmith.isolation.protocol import FrameReader, server_message

pytestmark = pytest.mark.skipif(torch.cuda.is_available(),
                                reason="a GPU runs kernels compiled, not interpreted")

# Right first-order gradients through a kernel; backward hangs on a non-contiguous grad_output
# (the robustness check), after the gradients check has launched kernels.
HANGS = '''
import time
import torch
import triton
import triton.language as tl
import gradsmith


@triton.jit
def _twice(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, 2 * tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def _run(x):
    y = torch.empty_like(x)
    _twice[(triton.cdiv(x.numel(), 32),)](x, y, x.numel(), BLOCK=32)
    return y


@gradsmith.example(lambda: (torch.randn(6, dtype=torch.float64, requires_grad=True),))
class Twice(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return _run(x.contiguous())

    @staticmethod
    def backward(ctx, g):
        if not g.is_contiguous():
            time.sleep(600)
        return _run(g.contiguous())
'''


def test_the_row_says_the_scaled_limit_and_why(tmp_path):
    path = tmp_path / "twice.py"
    path.write_text(textwrap.dedent(HANGS))
    proc = subprocess.Popen(
        [sys.executable, "-m", "gradsmith", "check", str(path), "--timeout", "3", "--no-compat",
         "--format", "json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        cwd=tmp_path, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # the group this test created
            proc.wait()
    (row,) = json.loads(out)["results"]
    assert row["error"] == "timeout", err
    limit = 3 * worker.INTERPRETED_SCALE
    assert f"timed out after {limit:g} s, the --timeout of 3 s scaled" in row["reason"]
    assert "interpreter" in row["reason"]
    assert "gradients" in row["checks"]  # the checks that finished keep their verdicts


def test_the_server_scales_a_task_once_and_tells_the_parent(tmp_path):
    read, write = os.pipe()
    server = worker.Server(-1, write, logs=str(tmp_path))
    try:
        task = worker._Task(index=7, keeper=0, fd=-1, log="", timeout=30.0)
        server._interpreted(task)
        server._interpreted(task)  # once only
        assert task.timeout == 30.0 * worker.INTERPRETED_SCALE
        messages = [server_message(p) for p in FrameReader().feed(os.read(read, 1 << 16))]
        assert messages == [("interpreted", 7, 30.0 * (worker.INTERPRETED_SCALE - 1))]
    finally:
        for fd in (read, write, server.wake_r, server.wake_w):
            os.close(fd)

