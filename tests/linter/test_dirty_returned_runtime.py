"""GS233 at run time (fixtures/dirty_returned.py, CPU): apply raises on the path that marks a
tensor dirty without returning it, and not on the path that does not mark it; the marked
tensor returned through a helper is fine (compared with ``x * 2``)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gradsmith.linter import lint

FIXTURE = Path(__file__).parent / "fixtures" / "dirty_returned.py"


@pytest.fixture(scope="module")
def mod(load_fixture):
    return load_fixture(FIXTURE, "dirty_returned_fixture")


def test_marked_but_not_returned_raises_and_is_an_error(mod):
    x = torch.randn(4, 3, requires_grad=True)
    running = torch.zeros(3)
    torch.testing.assert_close(mod.TrackedNorm.apply(x, running, False), x - running)  # eval
    with pytest.raises(RuntimeError, match="marked as dirty during the forward method were not"):
        mod.TrackedNorm.apply(x, running, True)
    found = [(f.code, f.severity, f.line) for f in lint(FIXTURE, config=False)]
    line = FIXTURE.read_text().splitlines().index("        ctx.mark_dirty(running_mean)  # GS233") + 1
    assert found == [("GS233", "error", line)]


def test_marked_tensor_returned_through_a_helper_is_fine(mod):
    x = torch.randn(3)
    leaf = x.clone().requires_grad_()
    y = leaf.clone()
    out = mod.InPlaceScale.apply(y)
    assert out is y
    torch.testing.assert_close(out, x * 2)
