"""GS109 on a backward whose fall-through needs a gradient kept from forward to be None
(issue 19): idle when that gradient belongs to the one input backward differentiates
(backward then never runs), an error when another input may still need a gradient.
Both shown by running the fixture."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from gradsmith.linter import lint


def _load(path):
    spec = importlib.util.spec_from_file_location("gs_idle_fallthrough", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_fallthrough_needing_no_gradient_is_idle_and_one_another_input_reaches_raises(
    fixtures_dir,
):
    path = fixtures_dir / "idle_fallthrough.py"
    lines = path.read_text().splitlines()
    pair = next(i for i, line in enumerate(lines, 1) if "# GS109" in line)
    assert [f.line for f in lint(path, config=False) if f.code == "GS109"] == [pair]
    mod = _load(path)
    labels = torch.tensor([[0.5, -1.0], [2.0, 0.0]], dtype=torch.float64)
    acts = torch.tensor([[1.0, 2.0], [-1.0, 3.0]], dtype=torch.float64, requires_grad=True)
    out = mod.SquaredLoss.apply(acts, labels, "none")
    w = torch.tensor([0.5, -2.0], dtype=torch.float64)
    (got,) = torch.autograd.grad((out * w).sum(), acts)
    (ref,) = torch.autograd.grad((((acts - labels) ** 2).sum(-1) * w).sum(), acts)
    torch.testing.assert_close(got, ref)  # the return path: right gradient
    out = mod.SquaredLoss.apply(acts.detach(), labels, "none")
    assert out.grad_fn is None  # the fall-through's case: backward has nothing to run for

    a = torch.tensor([[1.0, 2.0]], dtype=torch.float64)
    b = torch.tensor([[3.0, -1.0]], dtype=torch.float64, requires_grad=True)
    out = mod.PairLoss.apply(a, b)  # only b needs a gradient: backward runs, falls through
    with pytest.raises(RuntimeError, match="incorrect number of gradients"):
        out.sum().backward()
