"""A custom op registered through a project's wrapper that adds the namespace itself
(`@register_kernel_op("swiglu_bwd", mutates_args=(...))`, axolotl; issue 19) is a kernel
(GS215) that writes what mutates_args names (GS227): both shown at run time."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gradsmith.linter import lint

FIXTURE = Path(__file__).parent / "fixtures" / "op_wrapper.py"


@pytest.fixture(scope="module")
def mod(load_fixture):
    return load_fixture(FIXTURE, "op_wrapper_fixture")  # registers opwrap::double_into once


def test_lint_reads_the_wrapped_custom_op():
    got = sorted((f.line, f.code) for f in lint(FIXTURE, config=False))
    assert got == [(30, "GS215"), (30, "GS227")]


def test_wrapped_op_loses_the_second_derivative_and_overwrites_the_saved_buffer(mod):
    x = torch.tensor([1.0, -2.0], dtype=torch.float64, requires_grad=True)
    y = mod.Double.apply(x)
    (g,) = torch.autograd.grad((y ** 2).sum(), x, create_graph=True)
    torch.testing.assert_close(g, 8 * x.detach())  # d/dx (2x)^2 = 8x, by hand
    assert g.grad_fn is None  # the second derivative (8) is silently missing
    y = mod.Double.apply(x)
    y.sum().backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
