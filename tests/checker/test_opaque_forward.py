"""Where forward returns what a guessed callable computes (``SwiGLU(g, u, kernel)`` returning
``kernel(g, u)``), a gradient error on every invented callable shows nothing: backward alone
decides (issue 18, round 13 task n; reduced from a fused-activation wrapper whose project passes
a Triton or CUDA kernel, judged correct). A backward that is the gradient of some forward
(symmetric derivative) is INCOMPLETE, not FAIL; one that is the gradient of no forward
(``d grad_g / d u != d grad_u / d g``) still FAILs, whatever the callable."""

from __future__ import annotations

from importlib.util import module_from_spec, spec_from_file_location

import pytest
import torch

from gradsmith.checkrun.session import run_check
from gradsmith.discovery import Source

CASE = '''
import torch


class Swiglu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, g, u, kernel):
        ctx.save_for_backward(g, u)
        return kernel(g, u)

    @staticmethod
    def backward(ctx, grad):
        g, u = ctx.saved_tensors
        sig = torch.sigmoid(g)
        grad_g = grad * u * sig * (1 + g * (1 - sig)){planted}
        return grad_g, grad * g * sig, None
'''

ASYMMETRIC = " * 1.5"  # grad_g scaled alone: no forward has this gradient


def _load(tmp_path, planted: str):
    path = tmp_path / "swiglu.py"
    path.write_text(CASE.replace("{planted}", planted))
    spec = spec_from_file_location(f"swiglu_{abs(hash((str(path), planted)))}", path)
    module = module_from_spec(spec)
    spec.loader.exec_module(module)
    return path, module


def _row(tmp_path, planted: str = "") -> dict:
    path, _ = _load(tmp_path, planted)
    (row,) = run_check([Source("file", str(path), "swiglu.py")], isolate=False,
                       options={"compat": False}).rows
    return row


def _findings(row: dict, code: str) -> list[dict]:
    return [f for f in row["report"]["findings"] if f["code"] == code]


def test_the_backward_is_silu_times_u_by_autograd(tmp_path):
    _, module = _load(tmp_path, "")
    gen = torch.Generator().manual_seed(0)
    g, u = (torch.randn(3, 4, generator=gen, dtype=torch.float64, requires_grad=True)
            for _ in range(2))
    v = torch.randn(3, 4, generator=gen, dtype=torch.float64)
    got = torch.autograd.grad(module.Swiglu.apply(g, u, lambda a, b: a * torch.sigmoid(a) * b),
                              (g, u), v)
    want = torch.autograd.grad(torch.nn.functional.silu(g) * u, (g, u), v)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)


def test_a_consistent_backward_under_a_guessed_kernel_is_incomplete_not_fail(tmp_path):
    row = _row(tmp_path)
    assert row["verdict"] == "fail" and row["error"] == "incomplete", row["text"]
    (said,) = _findings(row, "unconfirmed-guess")
    assert "symmetric" in said["message"] and "kernel" in said["message"]
    assert not [f for f in row["report"]["findings"] if f["severity"] == "error"]


@pytest.mark.parametrize("planted", [ASYMMETRIC])
def test_a_backward_that_is_no_gradient_still_fails(tmp_path, planted):
    row = _row(tmp_path, planted)
    assert row["verdict"] == "fail" and row["error"] != "incomplete", row["text"]
    errors = [f for f in row["report"]["findings"] if f["severity"] == "error"]
    assert any(f["code"] == "gradient-mismatch" and "gradient of no forward" in f["message"]
               for f in errors), row["text"]
