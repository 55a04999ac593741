"""Gradient tests for my_ops.py, the way a user's own test suite would write them."""

import torch

from gradsmith.testing import assert_gradients
from my_ops import ClippedSignSTE, Swish, _clipped_identity


def test_swish_gradients():
    assert_gradients(Swish, torch.randn(8, 3), torch.tensor(0.7, requires_grad=True))


def test_sign_ste_matches_its_surrogate():
    assert_gradients(ClippedSignSTE, torch.randn(100), 1.0, surrogate=_clipped_identity)
