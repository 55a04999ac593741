"""GS238 at run time (issue 19, dgl's cooperative convolution): forward builds one output
per item in a loop and returns the last item, so the output is the wrong tensor."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gradsmith.linter import lint

FIXTURE = Path(__file__).parent / "fixtures" / "loop_result.py"


def test_last_iteration_returned_instead_of_the_collection(load_fixture):
    line = next(i for i, text in enumerate(FIXTURE.read_text().splitlines(), 1)
                if "# GS238" in text)
    assert [(f.line, f.code) for f in lint(FIXTURE, config=False)] == [(line, "GS238")]
    mod = load_fixture(FIXTURE, "loop_result_fixture")

    xs = [torch.tensor([1.0, 2.0], requires_grad=True), torch.tensor([3.0], requires_grad=True)]
    ref = torch.cat([2 * x for x in xs])
    got = mod.Doubled.apply(*xs)
    assert got.shape != ref.shape  # the first item is dropped: tensor([6.])
    torch.testing.assert_close(got, 2 * xs[1].detach())
    with pytest.raises(RuntimeError):
        got.sum().backward()  # and its backward no longer fits the output
    fixed = mod.DoubledFixed.apply(*xs)
    torch.testing.assert_close(fixed, ref.detach())
    grads = torch.autograd.grad(fixed.sum(), xs)
    torch.testing.assert_close(grads, torch.autograd.grad(ref.sum(), xs))
