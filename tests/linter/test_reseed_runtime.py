"""GS231 at run time (fixtures/reseed.py, CPU): after `torch.manual_seed(0)`, a forward that
calls `torch.random.seed()` makes every later draw differ from run to run; one that draws its
seed from the generator keeps the run reproducible."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gradsmith.linter import lint

FIXTURE = Path(__file__).parent / "fixtures" / "reseed.py"


@pytest.fixture(scope="module")
def mod(load_fixture):
    return load_fixture(FIXTURE, "reseed_fixture")


def _draw_after(fn):
    torch.manual_seed(0)
    fn(torch.ones(4, 4, requires_grad=True), 0.5)
    return torch.rand(8)


@pytest.mark.parametrize("name, reproducible", [("Dropout", False), ("DropoutDrawn", True)])
def test_reseeding_breaks_reproducibility_and_is_reported(mod, name, reproducible):
    fn = getattr(mod, name).apply
    state = torch.get_rng_state()
    try:
        first, second = _draw_after(fn), _draw_after(fn)
    finally:
        torch.set_rng_state(state)
    assert torch.equal(first, second) is reproducible
    lines = FIXTURE.read_text().splitlines()
    start = lines.index(f"class {name}(torch.autograd.Function):") + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("class ")), len(lines))
    found = [(f.code, f.severity) for f in lint(FIXTURE, config=False)
             if f.code == "GS231" and start <= f.line <= end]
    assert found == ([] if reproducible else [("GS231", "warning")])
