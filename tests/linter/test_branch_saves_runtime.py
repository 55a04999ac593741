"""Saves of different lengths on different branches (issue 19, lint corpus 6: axolotl's
LoRA MLP saves 22 or 13 tensors): each unpack is matched to the save of its length, so an
intermediate written in backward is GS227 (a warning: only a second backward fails), not
GS103, while a saved input written in backward stays GS103 (the caller's tensor changes)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gradsmith.linter import lint

FIXTURE = Path(__file__).parent / "fixtures" / "branch_saves.py"


@pytest.fixture(scope="module")
def mod(load_fixture):
    return load_fixture(FIXTURE, "branch_saves_fixture")


def test_lint_tells_the_intermediate_from_the_input():
    got = [(f.line, f.code, f.severity) for f in lint(FIXTURE, config=False)]
    assert got == [(23, "GS227", "warning"), (48, "GS103", "error")]


def test_intermediate_write_fails_only_a_second_backward(mod):
    torch.manual_seed(0)
    x = torch.randn(3, dtype=torch.float64, requires_grad=True)
    w = torch.randn(3, dtype=torch.float64, requires_grad=True)
    for scale in (torch.tensor(1.5, dtype=torch.float64), None):
        y = mod.TwoLayouts.apply(x, w, scale)
        ref = ((x * w) ** 2 * (scale if scale is not None else 1)).sum()
        want = torch.autograd.grad(ref, (x, w))
        got = torch.autograd.grad(y.sum(), (x, w), retain_graph=True)
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b)  # the first backward is right
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            torch.autograd.grad(y.sum(), (x, w))


def test_saved_input_write_changes_the_callers_tensor(mod):
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    w = torch.tensor([3.0, 4.0], requires_grad=True)
    mod.TwoLayoutsInput.apply(x, w, None).sum().backward()
    torch.testing.assert_close(x.detach(), torch.tensor([2.0, 4.0]))  # doubled in place
