"""Building blocks: layouts, quality bands, kink suspects, shape reduction rule, RNG replay."""

import pytest
import torch

from gradsmith.checker.approximate import band
from gradsmith.checker.inputs import is_once_differentiable, resolve_target
from gradsmith.checker.probe import _kink_suspects
from gradsmith.checker.structure import _expandable
from gradsmith.checker.subject import seeded
from gradsmith.checker.tensors import close, noncontiguous


@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 4)])
def test_noncontiguous_keeps_values_and_breaks_view(shape):
    x = torch.randn(shape, dtype=torch.float64)
    y = noncontiguous(x)
    assert torch.equal(x, y) and not y.is_contiguous()
    if len(shape) >= 2:
        with pytest.raises(RuntimeError):
            y.view(-1)


def test_bands_are_ordered():
    assert [band(r) for r in (0, 1e-4, 5e-3, 5e-2, 0.3, 2.0)] == [
        "exact", "excellent", "good", "fair", "poor", "unusable"]


def test_kink_suspects_are_zeros_and_ties():
    x = torch.tensor([0.0, 1.5, -2.0, 1.5, 3.0, 4.0, 5.0, 6.0], dtype=torch.float64)
    mask, suspects = _kink_suspects(x)
    assert sorted(suspects.tolist()) == [0, 1, 3]
    assert mask.tolist() == [0, 0, 1, 0, 1, 1, 1, 1]
    none, empty = _kink_suspects(torch.arange(1.0, 9.0))
    assert none is None and empty.numel() == 0


def test_expandable_matches_autograd_rule():
    assert _expandable(torch.Size([3]), torch.Size([4, 3]))
    assert not _expandable(torch.Size([4]), torch.Size([4, 1]))


def test_seeded_replays_and_restores():
    state = torch.get_rng_state()
    a = seeded(3, torch.rand, 4)
    b = seeded(3, torch.rand, 4)
    assert torch.equal(a, b)
    assert torch.equal(torch.get_rng_state(), state)


def test_close_treats_none_as_zero():
    z = torch.zeros(3)
    assert close(None, z, 0, 0) and not close(None, z + 1, 0, 0)


def test_once_differentiable_detection_and_target_resolution():
    from torch.autograd.function import once_differentiable

    class F(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            return g * 2

    assert is_once_differentiable(F)
    assert resolve_target(F.apply).function_cls is F
    assert resolve_target(lambda x: x, name="f").name == "f"
