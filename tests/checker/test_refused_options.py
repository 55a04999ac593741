"""A further input set with an option the code itself refuses (``assert ctx.reduce`` in
backward, ``raise NotImplementedError`` under ``if not ctx.reduce:``) is left out with a
``refused-option`` info finding, not a ``backward-error``: the code states its precondition
loudly, no caller gets a wrong gradient from it (round 12 task l; reduced from a sign-split
multiplication whose backward asserts its ``reduce_bias`` flag). The same error on the first
set, a crash on the other value that no statement states, a condition that reads data, and a
wrong backward on the default path still FAIL."""

from __future__ import annotations

from importlib.util import module_from_spec, spec_from_file_location

import pytest
import torch

from gradsmith.checkrun.session import run_check
from gradsmith.discovery import Source

CASE = '''
import torch


class SignSplit(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, d, reduce={default}):
        ctx.save_for_backward(a, d)
        ctx.reduce = reduce
        out = a.clamp(min=0) * d
        return out.sum(-1) if reduce else out

    @staticmethod
    def backward(ctx, g):
        {refusal}
        a, d = ctx.saved_tensors
        g = g.unsqueeze(-1)
        return g * d * (a >= 0){planted}, g * a.clamp(min=0), None
'''

ASSERTED = "assert ctx.reduce"
RAISED = ('if not ctx.reduce:\n            raise NotImplementedError("only the reduced sum '
          'has a backward")')
ALIASED = "reduce = ctx.reduce\n        assert reduce, 'reduce=False has no backward'"
# the other value crashes on a shape, and nothing says it is unsupported: a plain bug
UNSTATED = "g = g if ctx.reduce else g.view(g.shape[0], 1).squeeze(-1)"
# the condition reads the cotangent too: a statement about data, not an option
ON_DATA = "assert ctx.reduce or g.dim() == 1"


def _load(tmp_path, refusal: str, planted: str = "", default: str = "True"):
    path = tmp_path / "signsplit.py"
    path.write_text(CASE.replace("{refusal}", refusal).replace("{planted}", planted)
                    .replace("{default}", default))
    spec = spec_from_file_location(f"signsplit_{abs(hash(str(path)))}", path)
    module = module_from_spec(spec)
    spec.loader.exec_module(module)
    return path, module


def _row(tmp_path, refusal: str, planted: str = "", default: str = "True") -> dict:
    path, _ = _load(tmp_path, refusal, planted, default)
    (row,) = run_check([Source("file", str(path), "signsplit.py")], isolate=False,
                       options={"compat": False}).rows
    return row


def _codes(row: dict, severity: str) -> set[str]:
    return {f["code"] for f in row["report"]["findings"] if f["severity"] == severity}


def _refusals(row: dict) -> list[str]:
    return [f["message"] for f in row["report"]["findings"] if f["code"] == "refused-option"]


@pytest.mark.parametrize("refusal", [ASSERTED, RAISED, ALIASED], ids=["assert", "raise", "alias"])
def test_an_option_the_code_refuses_is_left_out_and_the_function_passes(tmp_path, refusal):
    row = _row(tmp_path, refusal)
    assert "reduce=False" in row["inputs"]  # the flipped set was built and checked
    assert row["verdict"] == "pass", (_codes(row, "error"), row["text"])
    assert "backward-error" not in _codes(row, "error") | _codes(row, "warning")
    (said,) = _refusals(row)
    assert "reduce=False is refused by the code, not checked" in said, said
    assert ("asserts" if "assert" in refusal else "raises NotImplementedError") in said
    # Independent reference: on the default the gradients are autograd's of the same sum, and
    # the other value really raises in backward.
    _, module = _load(tmp_path, refusal)
    a = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    d = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    g = torch.randn(3, dtype=torch.float64)
    got = torch.autograd.grad(module.SignSplit.apply(a, d, True), (a, d), g)
    want = torch.autograd.grad((a.clamp(min=0) * d).sum(-1), (a, d), g)
    torch.testing.assert_close(got, want)
    out = module.SignSplit.apply(a, d, False)
    with pytest.raises((AssertionError, NotImplementedError)):
        out.backward(torch.ones_like(out))


def test_a_wrong_backward_on_the_default_still_fails(tmp_path):
    row = _row(tmp_path, ASSERTED, planted=" * 2")
    assert row["verdict"] == "fail"
    assert "gradient-mismatch" in _codes(row, "error")


def test_the_same_assert_failing_on_the_first_set_stays_an_error(tmp_path):
    row = _row(tmp_path, ASSERTED, default="False")  # forward's own default is refused
    assert row["verdict"] == "fail"
    assert "backward-error" in _codes(row, "error")
    assert not _refusals(row)


@pytest.mark.parametrize("refusal", [UNSTATED, ON_DATA], ids=["unstated", "on-data"])
def test_a_crash_on_the_other_value_not_stated_as_a_refusal_still_fails(tmp_path, refusal):
    row = _row(tmp_path, refusal)
    assert row["verdict"] == "fail", row["text"]
    assert "backward-error" in _codes(row, "error")
    assert not _refusals(row)
    errors = [f for f in row["report"]["findings"] if f["code"] == "backward-error"]
    assert all("reduce=False" in f["message"] for f in errors)  # on the flipped set only
