"""A ``return`` under ``if grad is None:`` in backward counts for GS108 only where forward turns
off gradient materialisation (issue 19, corpus 8 dev: two false errors on a guard that never
runs). Each verdict is shown by running the Function."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gradsmith.linter import lint

FIXTURE = Path(__file__).parent / "fixtures" / "none_grad_branch.py"


@pytest.fixture(scope="module")
def mod(load_fixture):
    return load_fixture(FIXTURE, "none_grad_branch_fixture")


def _leaf(seed):
    torch.manual_seed(seed)
    return torch.randn(3, dtype=torch.float64, requires_grad=True)


def test_lint_reports_only_the_returns_that_can_run():
    found = [f for f in lint(FIXTURE, config=False) if f.code == "GS108"]
    source = FIXTURE.read_text().splitlines()
    assert sorted(f.line for f in found) == sorted(
        i + 1 for i, text in enumerate(source) if "# GS108" in text)
    assert all(f.severity == "error" for f in found)


def test_dead_guard_never_runs_and_gives_autograd_gradients(mod):
    x, w = _leaf(0), _leaf(1)
    got = torch.autograd.grad(mod.DeadGuard.apply(x, w, 3.0)[0:2].sum(), (x, w))
    want = torch.autograd.grad((x * w * 3.0)[0:2].sum(), (x, w))
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)


def test_live_guard_fails_when_only_the_second_output_is_used(mod):
    x, w = _leaf(0), _leaf(1)
    _, total = mod.LiveGuard.apply(x, w)
    with pytest.raises(RuntimeError, match="incorrect number of gradients"):
        total.sum().backward()


def test_short_return_after_the_guard_fails(mod):
    with pytest.raises(RuntimeError, match="incorrect number of gradients"):
        mod.ShortAfterGuard.apply(_leaf(0), _leaf(1)).sum().backward()
