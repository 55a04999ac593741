"""fixtures/wrappers.py at run time: the GS125 line raises TypeError on the pinned torch,
the unpacked lookup computes torch's own grid-sample gradient, and the GS225 wrapper
computes the other Function (compared with plain torch)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from gradsmith.linter import lint

FIXTURE = Path(__file__).parent / "fixtures" / "wrappers.py"


@pytest.fixture(scope="module")
def mod(load_fixture):
    return load_fixture(FIXTURE, "wrappers_fixture")


@pytest.fixture(scope="module")
def findings():
    return {(f.line, f.code): f.severity for f in lint(FIXTURE, config=False)}


def _line(text: str) -> int:
    return next(i for i, line in enumerate(FIXTURE.read_text().splitlines(), 1) if text in line)


def _grid_case():
    torch.manual_seed(0)
    x = torch.randn(1, 2, 4, 4, dtype=torch.double, requires_grad=True)
    grid = (torch.rand(1, 3, 3, 2, dtype=torch.double) * 2 - 1).requires_grad_()
    out = F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
    g = torch.randn_like(out)
    return x, grid, g, torch.autograd.grad(out, (x, grid), g)


def test_calling_a_jit_operation_lookup_raises_type_error(mod, findings):
    x, grid, g, _ = _grid_case()
    with pytest.raises(TypeError, match="'tuple' object is not callable"):
        mod.GridSampleBackward.apply(g, x.detach(), grid.detach())
    assert findings[_line("# GS125"), "GS125"] == "error"


def test_unpacked_lookup_is_torchs_own_gradient_and_not_reported(mod, findings):
    x, grid, g, (rx, rgrid) = _grid_case()
    gx, ggrid = mod.GridSampleBackwardUnpacked.apply(g, x.detach(), grid.detach())
    torch.testing.assert_close((gx / 2, ggrid), (rx, rgrid))  # forward adds the same twice
    start = _line("class GridSampleBackwardUnpacked")
    assert not [key for key in findings if start <= key[0] < start + 12]


def test_wrapper_applying_the_other_function_computes_the_other_cumsum(mod, findings):
    s = torch.arange(4.0, dtype=torch.double).requires_grad_()
    torch.testing.assert_close(mod.reversed_cumsum(s), s.cumsum(-1))  # not reversed
    torch.testing.assert_close(mod.reversed_cumsum_either(s), s.flip(-1).cumsum(-1).flip(-1))
    (g,) = torch.autograd.grad(mod.reversed_cumsum_either(s), s, torch.ones(4, dtype=s.dtype))
    torch.testing.assert_close(g, torch.arange(1.0, 5.0, dtype=s.dtype))  # hand: d/ds_i = i+1
    wrong = {line for (line, code) in findings if code == "GS225"}
    assert wrong == {_line("return CumsumFunction.apply(s)  # GS225"),
                     _line("_reversed_cumsum = CumsumFunction.apply  # GS225")}
    assert all(findings[line, "GS225"] == "warning" for line in wrong)
