"""GS244 (fixtures/call_keywords.py, CPU): a helper called with a renamed keyword raises
TypeError on every call; the twin with the right name is correct (``torch.roll`` is the
reference) and silent."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gradsmith.linter import lint

FIXTURE = Path(__file__).parent / "fixtures" / "call_keywords.py"


@pytest.fixture(scope="module")
def mod(load_fixture):
    return load_fixture(FIXTURE, "call_keywords_fixture")


def test_a_renamed_keyword_fails_every_call_and_is_an_error(mod):
    torch.manual_seed(0)
    x = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    with pytest.raises(TypeError, match="unexpected keyword argument 'wrap'"):
        mod.ShiftRows.apply(x)
    w = torch.randn(4, 3, dtype=torch.float64)
    out = mod.ShiftRowsRight.apply(x)
    torch.testing.assert_close(out, torch.roll(x, 1, 0))
    torch.testing.assert_close(torch.autograd.grad((out * w).sum(), x)[0],
                               torch.autograd.grad((torch.roll(x, 1, 0) * w).sum(), x)[0])
    found = [(f.code, f.severity, f.line) for f in lint(FIXTURE, config=False)
             if f.code == "GS244"]
    assert found == [("GS244", "error", 25)]
