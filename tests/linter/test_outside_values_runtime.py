"""GS207 on a backward that returns ``torch.tensor(lib.fn(...))`` of a library outside torch
(issue 19, lint corpus 7), fixtures/outside_values.py on CPU with a NumPy stand-in for the
library: the first derivative is right, the second silently missing; the
``@once_differentiable`` twin raises, and a constant built with ``torch.tensor`` is silent."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import numpy as np
import pytest
import torch

from gradsmith.linter import lint

FIXTURE = Path(__file__).parent / "fixtures" / "outside_values.py"


def test_gradient_from_outside_values_is_gs207_and_loses_the_second_derivative(
    load_fixture, monkeypatch
):
    lines = FIXTURE.read_text().splitlines()
    marked = [i for i, line in enumerate(lines, 1) if "# GS207" in line]
    assert [(f.line, f.severity) for f in lint(FIXTURE, config=False) if f.code == "GS207"] \
        == [(line, "warning") for line in marked]  # not SquareOnce, not Scaled
    lib = types.ModuleType("sigkit")  # a library working on arrays: no autograd graph
    lib.square = lambda x: np.asarray(x) ** 2
    lib.backprop = lambda g, x: 2 * np.asarray(x) * np.asarray(g)
    monkeypatch.setitem(sys.modules, "sigkit", lib)
    mod = load_fixture(FIXTURE, "outside_values_fixture")

    x = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad(mod.Square.apply(x).sum(), x, create_graph=True)
    torch.testing.assert_close(g, 2 * x.detach())  # by hand: d/dx x^2
    assert g.grad_fn is None  # the second derivative (2) is silently missing
    ((g ** 2).sum() + (x ** 2).sum()).backward()
    torch.testing.assert_close(x.grad, 2 * x.detach())  # the penalty's 8x term lost
    (g,) = torch.autograd.grad((mod.SquareOnce.apply(x) ** 2).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable"):  # a gradient with a graph
        (g ** 2).sum().backward()
    (g,) = torch.autograd.grad(mod.Scaled.apply(x).sum(), x)
    torch.testing.assert_close(g, torch.full_like(x, 2.0))
