"""save_for_backward takes None and gives it back as None (fixtures/saved_none.py, CPU), so a
name bound to None is no GS105; a literal number it refuses still is."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gradsmith.linter import lint

FIXTURE = Path(__file__).parent / "fixtures" / "saved_none.py"


@pytest.fixture(scope="module")
def mod(load_fixture):
    return load_fixture(FIXTURE, "saved_none_fixture")


def _codes(name: str) -> list[str]:
    lines = FIXTURE.read_text().splitlines()
    start = lines.index(f"class {name}(torch.autograd.Function):") + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("class ")), len(lines))
    return [f.code for f in lint(FIXTURE, config=False) if start < f.line <= end]


@pytest.mark.parametrize("name, args", [("RecomputeLater", (2.0,)), ("MaybeKept", (False,))])
def test_none_saved_runs_right_and_is_not_reported(mod, name, args):
    x = torch.rand(4, dtype=torch.float64, requires_grad=True)
    w = torch.tensor(args[0], dtype=torch.float64) if name == "RecomputeLater" else args[0]
    y = getattr(mod, name).apply(x, w)
    reference = x.detach().requires_grad_()
    expected = reference * 2.0 if name == "RecomputeLater" else reference.exp()
    torch.testing.assert_close(torch.autograd.grad(y.sum(), x)[0],
                               torch.autograd.grad(expected.sum(), reference)[0])
    assert "GS105" not in _codes(name)


def test_a_saved_number_raises_and_stays_gs105(mod):
    with pytest.raises(TypeError, match="save_for_backward can only save variables"):
        mod.SavesNumber.apply(torch.ones(2, requires_grad=True))
    assert "GS105" in _codes("SavesNumber")
