"""Gradient tests for my_ops.py, the way a user's own test suite would write them."""

import torch
from my_ops import ClippedSignSTE, Swish, _clipped_identity

from gradsmith.testing import assert_gradients


def test_swish_gradients():
    assert_gradients(Swish, torch.randn(8, 3, requires_grad=True), torch.tensor(0.7, requires_grad=True))


def test_sign_ste_matches_its_surrogate():
    assert_gradients(ClippedSignSTE, torch.randn(100), 1.0, surrogate=_clipped_identity)
