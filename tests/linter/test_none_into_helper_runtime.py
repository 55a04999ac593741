"""GS240 followed into a helper (issue 19, lint corpus 6: InternEvo's
WeightParallelSddNt passes `parallel_dw`, None unless the weight needs a gradient, to
`_scaled_reduce_scatter`, whose first line is `n, k = parallel_dw.shape`): a frozen weight
raises AttributeError; the near miss whose helper tests for None matches autograd."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gradsmith.linter import lint

FIXTURE = Path(__file__).parent / "fixtures" / "none_into_helper.py"


@pytest.fixture(scope="module")
def mod(load_fixture):
    return load_fixture(FIXTURE, "none_into_helper_fixture")


def test_lint_reports_the_unguarded_helper_only():
    found = [(f.line, f.code) for f in lint(FIXTURE, config=False) if f.code == "GS240"]
    line = next(i for i, text in enumerate(FIXTURE.read_text().splitlines(), 1)
                if "# GS240" in text)
    assert found == [(line, "GS240")]


def _inputs():
    torch.manual_seed(0)
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    w = torch.randn(4, 2, dtype=torch.float64)  # frozen: needs no gradient
    return x, w


def test_frozen_weight_raises_attribute_error(mod):
    x, w = _inputs()
    with pytest.raises(AttributeError, match="'NoneType' object has no attribute 'shape'"):
        mod.Matmul.apply(x, w).sum().backward()


def test_guarded_helper_matches_autograd(mod):
    x, w = _inputs()
    (got,) = torch.autograd.grad(mod.MatmulGuarded.apply(x, w).sum(), x)
    (want,) = torch.autograd.grad((x @ w).sum(), x)
    torch.testing.assert_close(got, want)
