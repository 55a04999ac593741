"""GS242 (issue 19, lint corpus 6: Block-Sparse-Attention and flash-dmattn pad q/k/v to a
multiple of 8 and return the padded output): the caller gets extra columns, and the
backward that takes the width from the incoming gradient returns a gradient autograd
rejects. The near miss that cuts the output back matches autograd of `2 * x`."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gradsmith.linter import lint

FIXTURE = Path(__file__).parent / "fixtures" / "padded_output.py"


@pytest.fixture(scope="module")
def mod(load_fixture):
    return load_fixture(FIXTURE, "padded_output_fixture")


def test_lint_reports_the_padded_output_only():
    found = [(f.line, f.code, f.severity) for f in lint(FIXTURE, config=False)]
    line = next(i for i, text in enumerate(FIXTURE.read_text().splitlines(), 1)
                if "# GS242" in text)
    assert found == [(line, "GS242", "warning")]


def test_padded_output_has_extra_columns_and_backward_fails(mod):
    x = torch.randn(2, 6, dtype=torch.float64, requires_grad=True)
    y = mod.PaddedScale.apply(x)
    assert y.shape == (2, 8)  # two extra columns for a (2, 6) input
    with pytest.raises(RuntimeError, match="invalid gradient"):
        y.sum().backward()
    x4 = torch.randn(2, 8, dtype=torch.float64, requires_grad=True)  # no padding needed
    mod.PaddedScale.apply(x4).sum().backward()
    torch.testing.assert_close(x4.grad, torch.full_like(x4, 2.0))


def test_cut_back_output_matches_autograd(mod):
    x = torch.randn(2, 6, dtype=torch.float64, requires_grad=True)
    y = mod.CutBack.apply(x)
    torch.testing.assert_close(y, 2 * x.detach())
    (got,) = torch.autograd.grad(y.sum(), x)
    (want,) = torch.autograd.grad((2 * x).sum(), x)
    torch.testing.assert_close(got, want)
