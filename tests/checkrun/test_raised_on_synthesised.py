"""An error that only the synthesised inputs make is not an error-level finding (issue 18, the
held-out reading: a ``backward-error`` real inputs never meet). Reduced cases, written here:

- backward reads string keys of an argument forward only stores: it is a mapping whose entries
  are 1, not a guessed value that makes a mismatch of gradsmith's own choosing (it used to be
  a skip, before zero-config read string keys);
- backward raises on one layout only: the layout it runs on is checked (a scalar step size);
- backward raises on inputs whose every kind the code states, with an error about shapes
  (not about a value's kind) beside a guessed number, or on registered inputs: a defect,
  still a FAIL with ``backward-error``.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import textwrap

import pytest
import torch

from gradsmith.cli import main as cli_main

SOURCE = '''
import torch
from torch.autograd import Function
import gradsmith


class LookupTypo(Function):
    """The same with a typo in backward's key: raises on the user's own (valid) inputs."""

    @staticmethod
    def forward(ctx, x, table):
        ctx.table = table
        return x * 2 * table["unit"]

    @staticmethod
    def backward(ctx, g):
        return g * 2 * ctx.table["units"], None


gradsmith.example(lambda: (torch.randn(3, dtype=torch.float64, requires_grad=True),
                           {"unit": 1.5}))(LookupTypo)


class Stored(Function):
    """x * 3; backward reads a key of what forward only stored: nothing says what it is."""

    @staticmethod
    def forward(ctx, x, table):
        ctx.table = table
        return x * 3

    @staticmethod
    def backward(ctx, g):
        return g * 3 * ctx.table["unit"], None


class TransposeCrash(Function):
    """2x; backward multiplies shapes that never fit: x is read as a tensor (saved)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 2

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g @ x.t() @ x @ x


class RowLoss(Function):
    """A per-row loss (N, L) -> (N,) whose backward forgets to unsqueeze grad_output: a
    defect on every (N, L) with N != L, although ``smooth`` is a number nothing names."""

    @staticmethod
    def forward(ctx, logits, smooth):
        probs = torch.sigmoid(logits)
        ctx.vars = probs, smooth
        return (probs * probs).sum(1) + smooth

    @staticmethod
    def backward(ctx, g):
        probs, smooth = ctx.vars
        return 2 * probs * probs * (1 - probs) * g, None


class ScalarScale(Function):
    """x * s for a scalar s (a learned step size): backward sums s's gradient to one number."""

    @staticmethod
    def forward(ctx, x, s):
        ctx.save_for_backward(x, s)
        return x * s

    @staticmethod
    def backward(ctx, g):
        x, s = ctx.saved_tensors
        return g * s, (g * x).sum().reshape(s.shape)
'''


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    root = tmp_path_factory.mktemp("raised")
    source = root / "raised_cases.py"
    source.write_text(textwrap.dedent(SOURCE))
    report = root / "report.json"
    old = sys.stdout
    with open(report, "w") as handle:
        sys.stdout = handle
        try:
            cli_main(["check", str(source), "--no-isolate", "--format", "json"])
        finally:
            sys.stdout = old
    spec = importlib.util.spec_from_file_location("raised_cases", source)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    doc = json.loads(report.read_text())
    return {r["name"].split("::")[-1]: r for r in doc["results"]}, module


def test_a_mapping_only_backward_reads_gets_entries_of_one_not_a_mismatch_gradsmith_chose(rows):
    """Stored's backward scales by ``table["unit"]``, which forward never reads: the code says
    table is a mapping (string keys) but nothing says the value. An invented 0.5 made a
    gradient-mismatch of gradsmith's own choosing; each entry only backward reads is 1, and the
    Inputs column says so."""
    by_name, module = rows
    row = by_name["Stored"]
    assert row["verdict"] == "pass", row
    assert "only backward reads them, so each is 1" in json.dumps(row)
    # Independent reference: with a table of the kind backward reads, the gradient is right.
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    (got,) = torch.autograd.grad(module.Stored.apply(x, {"unit": 1.0}).sum(), x)
    (reference,) = torch.autograd.grad((x * 3).sum(), x)
    torch.testing.assert_close(got, reference)


def test_a_backward_raising_where_every_input_is_what_the_code_states_still_fails(rows):
    by_name, module = rows
    row = by_name["TransposeCrash"]
    assert row["verdict"] == "fail"
    assert {f["code"] for f in row["report"]["findings"] if f["severity"] == "error"} == {
        "backward-error"}
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match="cannot be multiplied"):  # by hand, same inputs
        module.TransposeCrash.apply(x).sum().backward()


def test_a_shape_error_beside_an_unnamed_number_is_the_functions_and_still_fails(rows):
    by_name, module = rows
    row = by_name["RowLoss"]
    assert row["verdict"] == "fail", row  # caught: raising on (N, L), wrong where it runs
    errors = {f["code"] for f in row["report"]["findings"] if f["severity"] == "error"}
    assert errors & {"backward-error", "gradient-mismatch"}, errors
    logits = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match="must match"):  # by hand, on its stated (N, L)
        module.RowLoss.apply(logits, 1.0).sum().backward()


def test_a_backward_raising_on_registered_inputs_still_fails(rows):
    by_name, module = rows
    (row,) = [r for name, r in by_name.items() if name.startswith("LookupTypo")]
    assert row["verdict"] == "fail"
    assert "backward-error" in {f["code"] for f in row["report"]["findings"]}
    x = torch.randn(3, dtype=torch.float64, requires_grad=True)
    with pytest.raises(KeyError):
        module.LookupTypo.apply(x, {"unit": 1.5}).sum().backward()


def test_the_layout_backward_runs_on_is_checked_and_a_correct_function_passes(rows):
    by_name, module = rows
    row = by_name["ScalarScale"]
    assert row["verdict"] == "pass", row["text"]
    assert "s: float64 ()" in row["inputs"]
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    s = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    got = torch.autograd.grad(module.ScalarScale.apply(x, s).sum(), (x, s))
    reference = torch.autograd.grad((x * s).sum(), (x, s))
    torch.testing.assert_close(got, reference)
