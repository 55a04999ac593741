"""backward returning a list fails when it runs (GS108, issue 19: found while writing the
odd-code fixtures): autograd unpacks only a tuple, so a list is one value. The near misses
(a tuple made from the list, a list spread into a tuple, the name rebound to a tuple) run
and give autograd's gradients."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gradsmith.linter import lint

FIXTURE = Path(__file__).parent / "fixtures" / "list_return.py"


@pytest.fixture(scope="module")
def mod(load_fixture):
    return load_fixture(FIXTURE, "list_return_fixture")


def _x():
    torch.manual_seed(0)
    return torch.randn(3, dtype=torch.float64, requires_grad=True)


def test_lint_reports_exactly_the_list_returns():
    lines = sorted(f.line for f in lint(FIXTURE, config=False) if f.code == "GS108")
    assert lines == [15, 25, 39, 49]
    assert all(f.severity == "error" for f in lint(FIXTURE, config=False) if f.code == "GS108")


@pytest.mark.parametrize("run, message", [
    (lambda m, x: m.ListPair.apply(x, x), "incorrect number of gradients"),
    (lambda m, x: m.ListOne.apply(x), r"expected Variable or None \(got list\)"),
    (lambda m, x: m.ListBuilt.apply(x, 1, 2), "incorrect number of gradients"),
    (lambda m, x: m.ListBuilt.apply(x), r"expected Variable or None \(got list\)"),
    (lambda m, x: m.ListArithmetic.apply(x, 1, 2), "incorrect number of gradients"),
], ids=["pair", "one", "built-extra", "built-alone", "arithmetic"])
def test_list_returns_fail_when_backward_runs(mod, run, message):
    with pytest.raises(RuntimeError, match=message):
        run(mod, _x()).sum().backward()


def test_near_misses_give_autograd_gradients(mod):
    x = _x()
    for run in (lambda t: mod.TupleOfList.apply(t, 1, 2), lambda t: mod.Rebound.apply(t, t)):
        (got,) = torch.autograd.grad(run(x).sum(), x)
        (want,) = torch.autograd.grad((2 * x).sum(), x)  # x + x and 2x: the same gradient
        torch.testing.assert_close(got, want)
