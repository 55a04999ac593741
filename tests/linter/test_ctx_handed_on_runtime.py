"""``Fn.forward(ctx, ...)`` inside a ``forward`` of a plain class that hands on its own ctx is a
delegation, not GS111 (issue 19, corpus 8 held-out reading); ``Fn.forward(x, ...)`` without a
ctx stays GS111. Each verdict is shown by running the code against autograd."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gradsmith.linter import lint

FIXTURE = Path(__file__).parent / "fixtures" / "ctx_handed_on.py"


@pytest.fixture(scope="module")
def mod(load_fixture):
    return load_fixture(FIXTURE, "ctx_handed_on_fixture")


def test_lint_reports_only_the_call_without_a_ctx():
    lines = FIXTURE.read_text().splitlines()
    found = sorted(f.line for f in lint(FIXTURE, config=False) if f.code == "GS111")
    assert found == [i + 1 for i, text in enumerate(lines) if "# GS111" in text]


def test_the_delegating_wrapper_runs_and_gives_autograd_gradients(mod):
    torch.manual_seed(0)
    x = torch.randn(4, dtype=torch.float64, requires_grad=True)
    (got,) = torch.autograd.grad(mod.Outer.apply(x).sum(), x)
    (want,) = torch.autograd.grad((x * 3.0).sum(), x)
    torch.testing.assert_close(got, want)
    with torch.no_grad():
        torch.testing.assert_close(mod.Wrapper.forward(None, x, 3.0), x * 3.0)


def test_the_call_without_a_ctx_fails(mod):
    with pytest.raises(TypeError):
        mod.shifted(torch.ones(3))
