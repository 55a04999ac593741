"""GS239 and GS240 at run time (issue 19, dgl's heterograph SpMM backward, FastVideo's
attention): an attribute of the `*grads` tuple, or of a name just set to None, raises
AttributeError on the branch that reads it, while the other branch computes the right
gradient."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gradsmith.linter import lint

FIXTURE = Path(__file__).parent / "fixtures" / "tuple_attr.py"


def test_tensor_attribute_of_a_tuple_raises_on_its_branch(load_fixture):
    line = next(i for i, text in enumerate(FIXTURE.read_text().splitlines(), 1)
                if "# GS239" in text)
    none_line = next(i for i, text in enumerate(FIXTURE.read_text().splitlines(), 1)
                     if "# GS240" in text)
    assert [(f.line, f.code) for f in lint(FIXTURE, config=False)] == [
        (line, "GS239"), (none_line, "GS240")]
    mod = load_fixture(FIXTURE, "tuple_attr_fixture")

    xs = (torch.tensor([1.0, -2.0], requires_grad=True), torch.tensor([3.0], requires_grad=True))
    refs = torch.autograd.grad(sum((2 * x).sum() for x in xs), xs)
    got = torch.autograd.grad(sum(o.sum() for o in mod.PerType.apply("sum", *xs)), xs)
    torch.testing.assert_close(got, refs)  # the branch the tests take is right
    with pytest.raises(AttributeError, match="shape"):
        torch.autograd.grad(sum(o.sum() for o in mod.PerType.apply("max", *xs)), xs)
    got = torch.autograd.grad(sum(o.sum() for o in mod.PerTypeFixed.apply("max", xs[0])), xs[0])
    torch.testing.assert_close(got, refs[:1])


def test_attribute_of_a_name_set_to_none_raises_on_its_branch(load_fixture):
    mod = load_fixture(FIXTURE, "tuple_attr_fixture_none")
    q = torch.tensor([1.0, -2.0, 0.5], requires_grad=True)
    (got,) = torch.autograd.grad(mod.Smoothed.apply(q).sum(), q)
    torch.testing.assert_close(got, torch.autograd.grad((2 * q).sum(), q)[0])
    with pytest.raises(AttributeError, match="NoneType"):
        torch.autograd.grad(mod.Smoothed.apply(q, True).sum(), q)
