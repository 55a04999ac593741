"""GS228 for inputs that may be numbers (fixtures/maybe_number.py, CPU): passing the number
the annotation or the isinstance test allows makes save_for_backward raise TypeError; a
tensor works, so the finding is a warning."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gradsmith.linter import lint

FIXTURE = Path(__file__).parent / "fixtures" / "maybe_number.py"


@pytest.fixture(scope="module")
def mod(load_fixture):
    return load_fixture(FIXTURE, "maybe_number_fixture")


@pytest.mark.parametrize("name", ["Varlen", "Checked"])
def test_a_number_fails_a_tensor_works_and_it_is_a_warning(mod, name):
    fn = getattr(mod, name).apply
    x = torch.ones(3, requires_grad=True)
    with pytest.raises(TypeError, match="save_for_backward can only save variables"):
        fn(x, 5)
    torch.testing.assert_close(torch.autograd.grad(fn(x, torch.tensor(5.0)).sum(), x)[0],
                               torch.full((3,), 2.0 if name == "Varlen" else 1.0))
    lines = FIXTURE.read_text().splitlines()
    start = lines.index(f"class {name}(torch.autograd.Function):")
    found = [(f.code, f.severity) for f in lint(FIXTURE, config=False)
             if start < f.line < start + 8 and f.code in ("GS105", "GS228")]
    assert found == [("GS228", "warning")]


def test_an_input_annotated_as_a_tensor_only_is_not_reported():
    lines = FIXTURE.read_text().splitlines()
    start = lines.index("class AnnotatedTensor(torch.autograd.Function):")
    assert not [f for f in lint(FIXTURE, config=False) if f.line > start]


def test_an_input_documented_as_a_float_fails_as_one_and_it_is_a_warning(mod):
    x = torch.linspace(-2.0, 2.0, 9, requires_grad=True)
    with pytest.raises(TypeError, match="save_for_backward can only save variables"):
        mod.DocumentedFloat.apply(x, -1.0, 1.0)  # what the docstring tells callers to pass
    low, high = torch.tensor(-1.0), torch.tensor(1.0)
    got = torch.autograd.grad(mod.DocumentedFloat.apply(x, low, high).sum(), x)[0]
    want = torch.autograd.grad(torch.clamp(x, low, high).sum(), x)[0]
    torch.testing.assert_close(got, want)
    lines = FIXTURE.read_text().splitlines()
    start = lines.index("class DocumentedFloat(torch.autograd.Function):")
    found = [(f.code, f.severity, f.line - start) for f in lint(FIXTURE, config=False)
             if start < f.line < start + 14 and f.code in ("GS105", "GS228")]
    assert found == [("GS228", "warning", 11)] * 2
