"""GS227 for a saved intermediate a kernel fills for its effect and backward then returns
(issue 19, lint corpus 6 dev: BMTrain's fused cross entropy calls
`cross_entropy_backward_inplace(..., softmax, ...)` and returns `softmax`). The stand-in
kernel writes through NumPy like a C++ extension, without a version bump: a second backward
through the graph is silently wrong, against autograd of torch's cross entropy."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gradsmith.linter import lint

FIXTURE = Path(__file__).parent / "fixtures" / "filled_for_effect.py"


@pytest.fixture(scope="module")
def mod(load_fixture):
    return load_fixture(FIXTURE, "filled_for_effect_fixture")


def test_lint_reports_the_filled_saved_tensor_only():
    found = [(f.line, f.code) for f in lint(FIXTURE, config=False) if f.code == "GS227"]
    line = next(i for i, text in enumerate(FIXTURE.read_text().splitlines(), 1)
                if "# GS227" in text)
    assert found == [(line, "GS227")]


def _twice(fn, x, target):
    y = fn.apply(x, target)
    y.sum().backward(retain_graph=True)
    first = x.grad.clone()
    y.sum().backward()
    return first, x.grad - first


def test_second_backward_starts_from_the_gradient_instead_of_the_softmax(mod):
    torch.manual_seed(0)
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    target = torch.tensor([0, 2, 1])
    (ref,) = torch.autograd.grad(torch.nn.functional.cross_entropy(x, target, reduction="sum"), x)
    first, second = _twice(mod.FusedCE, x, target)
    torch.testing.assert_close(first, ref)
    assert not torch.allclose(second, ref)  # silently wrong: no error was raised
    x.grad = None
    first, second = _twice(mod.FusedCEOut, x, target)  # the near miss: right both times
    torch.testing.assert_close(first, ref)
    torch.testing.assert_close(second, ref)
