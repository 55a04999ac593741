"""GS222, second reading (fixtures/forward_values_only.py, CPU): the reported cross entropy
gives the right first derivative but a silently wrong (zero) second derivative, against
autograd of torch's own cross entropy; the twins are silent: one raises on double backward,
one is twice differentiable."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gradsmith.linter import lint

FIXTURE = Path(__file__).parent / "fixtures" / "forward_values_only.py"


@pytest.fixture(scope="module")
def mod(load_fixture):
    return load_fixture(FIXTURE, "forward_values_only_fixture")


def _inputs():
    torch.manual_seed(0)
    logits = torch.randn(4, 5, dtype=torch.float64, requires_grad=True)
    labels = torch.tensor([0, 3, 1, 4])
    return logits, labels, torch.randn(4, 5, dtype=torch.float64)


def _hvp(loss, logits, v):
    (g,) = torch.autograd.grad(loss, logits, create_graph=True)
    if not g.requires_grad:
        return torch.zeros_like(logits)  # no graph: autograd treats it as a constant
    return torch.autograd.grad((g * v).sum(), logits)[0]


def _reference(logits, labels, v):
    loss = torch.nn.functional.cross_entropy(logits, labels, reduction="sum")
    return torch.autograd.grad(loss, logits, retain_graph=True)[0], _hvp(loss, logits, v)


def test_only_the_reported_backward_is_marked():
    found = [(f.code, f.line) for f in lint(FIXTURE, config=False)]
    lines = [n for n, t in enumerate(FIXTURE.read_text().splitlines(), 1)
             if t.endswith("# GS222")]
    assert found == [("GS222", n) for n in lines] and len(lines) == 1


def test_reported_second_derivative_is_silently_zero(mod):
    logits, labels, v = _inputs()
    want_g, want_h = _reference(logits, labels, v)
    loss = mod.CrossEntropyFromLogProbs.apply(logits, labels)
    torch.testing.assert_close(torch.autograd.grad(loss, logits, retain_graph=True)[0], want_g)
    got_h = _hvp(loss, logits, v)
    assert want_h.abs().max() > 1e-3
    assert got_h.abs().max() == 0  # silently wrong, no error


def test_twins_raise_or_are_right(mod):
    logits, labels, v = _inputs()
    want_g, want_h = _reference(logits, labels, v)
    loss = mod.CrossEntropyFromLogits.apply(logits, labels)
    torch.testing.assert_close(_hvp(loss, logits, v), want_h)
    loss = mod.CrossEntropyOnce.apply(logits, labels)
    (g,) = torch.autograd.grad(loss, logits, create_graph=True)
    torch.testing.assert_close(g, want_g)
    with pytest.raises(RuntimeError, match="does not require grad|once_differentiable"):
        torch.autograd.grad((g * v).sum(), logits)
