"""A backward written for a fixed size (a quaternion's ``view(-1, 4, 1)``) raising on the
"other shapes" set, whose size forward accepted silently, is a ``fixed-size`` warning, not a
``backward-error``: the first set ran at that size and its findings stand."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from gradsmith.checkrun.session import run_check
from gradsmith.discovery import Source

CASE = '''
import torch
import torch.nn.functional as F


def _normalise_jacobian(qh, norm):
    v = qh.view(-1, 4, 1)
    eye = torch.eye(4, dtype=qh.dtype).expand(v.shape[0], 4, 4)
    return (eye - v @ v.transpose(1, 2)) / norm.view(-1, 1, 1){scale}


class UnitQuat(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q):
        ctx.save_for_backward(q)
        return F.normalize(q, dim=-1)

    @staticmethod
    def backward(ctx, g):
        (q,) = ctx.saved_tensors
        norm = q.norm(dim=-1)
        jac = _normalise_jacobian(F.normalize(q, dim=-1), norm)
        return (jac @ g.reshape(-1, 4, 1)).view(q.shape)
'''


def _row(tmp_path, scale: str) -> dict:
    path = tmp_path / "quat.py"
    path.write_text(CASE.replace("{scale}", scale))
    (row,) = run_check([Source("file", str(path), "quat.py")], isolate=False).rows
    return row


def _codes(row: dict, severity: str) -> set[str]:
    return {f["code"] for f in row["report"]["findings"] if f["severity"] == severity}


def test_a_fixed_size_backward_is_a_warning_and_the_function_passes(tmp_path):
    row = _row(tmp_path, "")
    assert row["verdict"] == "pass", _codes(row, "error")
    assert "fixed-size" in _codes(row, "warning")
    assert "backward-error" not in _codes(row, "error")
    # Independent reference: the Function agrees with autograd of F.normalize at size 4, and
    # its backward really raises at size 5.
    from importlib.util import module_from_spec, spec_from_file_location
    spec = spec_from_file_location("quat_case", tmp_path / "quat.py")
    module = module_from_spec(spec)
    spec.loader.exec_module(module)
    q = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    g = torch.randn(3, 4, dtype=torch.float64)
    (got,) = torch.autograd.grad(module.UnitQuat.apply(q), q, g)
    (want,) = torch.autograd.grad(F.normalize(q, dim=-1), q, g)
    torch.testing.assert_close(got, want)
    five = torch.randn(2, 5, dtype=torch.float64, requires_grad=True)
    out = module.UnitQuat.apply(five)
    try:
        out.backward(torch.ones_like(out))
    except RuntimeError as e:
        assert "is invalid for input of size" in str(e)
    else:
        raise AssertionError("backward should raise at size 5")


def test_a_wrong_backward_at_the_fixed_size_still_fails(tmp_path):
    row = _row(tmp_path, " * 2")
    assert row["verdict"] == "fail"
    assert "gradient-mismatch" in _codes(row, "error")
