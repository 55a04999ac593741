"""GS245 (fixtures/assert_tensor.py, CPU): ``assert x.contiguous()`` in the function that
applies a Function raises for every multi-element input; the ``is_contiguous()`` twin is
right (autograd of ``x**3`` is the reference) and silent."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gradsmith.linter import lint

FIXTURE = Path(__file__).parent / "fixtures" / "assert_tensor.py"


@pytest.fixture(scope="module")
def mod(load_fixture):
    return load_fixture(FIXTURE, "assert_tensor_fixture")


def test_asserting_a_tensor_fails_and_is_reported(mod):
    torch.manual_seed(0)
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match="ambiguous"):
        mod.cube(x)
    got = torch.autograd.grad(mod.cube_checked(x).sum(), x)[0]
    torch.testing.assert_close(got, torch.autograd.grad((x**3).sum(), x)[0])
    found = [(f.code, f.severity, f.line) for f in lint(FIXTURE, config=False)
             if f.code == "GS245"]
    assert found == [("GS245", "warning", 20)]
