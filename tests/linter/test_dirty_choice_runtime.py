"""GS233 and a conditional output (fixtures/dirty_choice.py, CPU): with the option on, the
returned `out` is the input marked dirty and apply works, with the gradient of ``2 * x``;
marking a tensor no return can be makes apply raise, and only that is reported."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gradsmith.linter import lint

FIXTURE = Path(__file__).parent / "fixtures" / "dirty_choice.py"


@pytest.fixture(scope="module")
def mod(load_fixture):
    return load_fixture(FIXTURE, "dirty_choice_fixture")


def test_dirty_input_returned_through_a_conditional_is_not_reported(mod):
    torch.manual_seed(0)
    base = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    w = torch.randn(3, 4, dtype=torch.float64)
    for inplace in (False, True):
        x = base * 1.0  # not a leaf: it may be changed in place
        out = mod.DoubleMaybeInplace.apply(x, inplace)
        assert (out is x) is inplace
        (got,) = torch.autograd.grad((out * w).sum(), base)
        torch.testing.assert_close(got, torch.autograd.grad((2 * base * w).sum(), base)[0])
    with pytest.raises(RuntimeError, match="dirty"):
        mod.DoubleMarksBuffer.apply(base * 1.0, torch.zeros(3, 4, dtype=torch.float64))
    found = [(f.code, f.severity, f.line) for f in lint(FIXTURE, config=False)]
    line = next(n for n, t in enumerate(FIXTURE.read_text().splitlines(), 1)
                if t.endswith("# GS233"))
    assert found == [("GS233", "error", line)]
