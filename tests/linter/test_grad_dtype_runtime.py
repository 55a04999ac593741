"""GS232 at run time (fixtures/grad_dtype.py, CPU): autograd casts the bfloat16 gradient back
to float32 without a word, so it differs from autograd of ``q * k * 3`` by bfloat16's
rounding; the helper that casts to the input's dtype matches."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gradsmith.linter import lint

FIXTURE = Path(__file__).parent / "fixtures" / "grad_dtype.py"


@pytest.fixture(scope="module")
def mod(load_fixture):
    return load_fixture(FIXTURE, "grad_dtype_fixture")


def test_fixed_bfloat16_gradient_loses_precision_silently(mod):
    torch.manual_seed(0)
    q = torch.randn(64, requires_grad=True)
    k = torch.randn(64, requires_grad=True)
    want = torch.autograd.grad((q * k * 3).sum(), (q, k))
    got = torch.autograd.grad(mod.Product.apply(q, k).sum(), (q, k))
    assert got[0].dtype == torch.float32  # cast back: nothing says it was rounded
    assert not torch.equal(got[0], want[0])
    torch.testing.assert_close(got[0], want[0], rtol=2**-8, atol=0)  # bfloat16's rounding
    torch.testing.assert_close(got[1], want[1])
    kept = torch.autograd.grad(mod.ProductKept.apply(q, k).sum(), (q, k))
    torch.testing.assert_close(kept[0], want[0])
    lines = FIXTURE.read_text().splitlines()
    found = [(lines[f.line - 1].strip(), f.severity) for f in lint(FIXTURE, config=False)
             if f.code == "GS232"]
    assert found == [("return dq.to(torch.bfloat16), dk.to(q.dtype)  # GS232", "warning")]
