"""A flipped option that makes forward hard while backward keeps the soft map's verified
gradient is a ``straight-through-option`` warning, not an ``undeclared-estimator`` error
(issue 18, round 13 task n; reduced from a Gumbel-sigmoid whose ``hard=True`` returns the
thresholded sample and backward is the sigmoid's reparameterisation gradient: judged correct).
A hard mode whose backward differs from the soft one, and a soft mode whose gradient is
wrong, still FAIL."""

from __future__ import annotations

from importlib.util import module_from_spec, spec_from_file_location

import pytest
import torch

from gradsmith.checkrun.session import run_check
from gradsmith.discovery import Source

CASE = '''
import torch


class NoisySigmoid(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, temperature=1.0, hard=False):
        noise = torch.rand_like(logits) - 0.5
        values = logits + noise
        soft = torch.sigmoid(values / temperature)
        ctx.save_for_backward(soft)
        ctx.temperature = temperature
        ctx.hard = hard
        return (values > 0).to(logits.dtype) if hard else soft

    @staticmethod
    def backward(ctx, g):
        (soft,) = ctx.saved_tensors
        slope = soft * (1 - soft) / ctx.temperature{planted}
        return g * slope, None, None
'''

# the hard mode gets another gradient than the soft one: not the soft map's straight-through
HARD_OTHER = " * (2.0 if ctx.hard else 1.0)"
# the soft mode's own gradient is wrong (a missing temperature in the hard mode's too)
SOFT_WRONG = " * ctx.temperature"


def _row(tmp_path, planted: str = "") -> dict:
    path = tmp_path / "noisy.py"
    path.write_text(CASE.replace("{planted}", planted))
    (row,) = run_check([Source("file", str(path), "noisy.py")], isolate=False,
                       options={"compat": False}).rows
    return row


def _codes(row: dict, severity: str) -> set[str]:
    return {f["code"] for f in row["report"]["findings"] if f["severity"] == severity}


def test_a_hard_mode_keeping_the_soft_gradient_passes_with_a_warning(tmp_path):
    row = _row(tmp_path)
    assert "hard=True" in row["inputs"]  # the flipped set was built and checked
    assert row["verdict"] == "pass", (_codes(row, "error"), row["text"])
    assert "straight-through-option" in _codes(row, "warning")
    assert "undeclared-estimator" not in _codes(row, "error")


def test_the_soft_gradient_is_the_closed_form(tmp_path):
    path = tmp_path / "noisy.py"
    path.write_text(CASE.replace("{planted}", ""))
    spec = spec_from_file_location("noisy_reference", path)
    module = module_from_spec(spec)
    spec.loader.exec_module(module)
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    g = torch.randn(3, 4, dtype=torch.float64)
    torch.manual_seed(5)
    (got,) = torch.autograd.grad(module.NoisySigmoid.apply(x, 1.5, False), x, g)
    torch.manual_seed(5)
    y = x.detach().clone().requires_grad_()
    (want,) = torch.autograd.grad(torch.sigmoid((y + torch.rand_like(y) - 0.5) / 1.5), y, g)
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("planted", [HARD_OTHER, SOFT_WRONG], ids=["hard-other", "soft-wrong"])
def test_a_wrong_backward_still_fails(tmp_path, planted):
    row = _row(tmp_path, planted)
    assert row["verdict"] == "fail", row["text"]
    assert _codes(row, "error") & {"undeclared-estimator", "gradient-mismatch"}, row["text"]
    if planted == HARD_OTHER:
        assert "straight-through-option" not in _codes(row, "warning")
