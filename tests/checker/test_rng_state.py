"""gradsmith.check leaves every global random stream where it found it: torch's, Python's
``random`` and NumPy's global generator, however much the Function under check draws."""

from __future__ import annotations

import random

import numpy as np
import torch
from torch.autograd import Function

import gradsmith


class NoisyScale(Function):
    """Correct gradient; forward draws from all three global generators."""

    @staticmethod
    def forward(ctx, x):
        random.random()
        np.random.rand(3)
        torch.rand(3)
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        random.random()
        np.random.rand(3)
        return grad * 2


def test_check_restores_torch_python_and_numpy_random_states():
    random.seed(1)
    np.random.seed(2)
    torch.manual_seed(3)
    x = torch.randn(4, dtype=torch.float64, requires_grad=True)
    expected = (random.random(), np.random.rand(), torch.rand(1).item())
    random.seed(1)
    np.random.seed(2)
    torch.manual_seed(3)
    x = torch.randn(4, dtype=torch.float64, requires_grad=True)
    report = gradsmith.check(NoisyScale, x)
    assert report.passed, report
    # The next draws are the ones an unchecked program would have made.
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == expected
