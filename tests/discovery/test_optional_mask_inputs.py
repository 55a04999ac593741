"""A None-default parameter named as a mask, bias or weight of something (``weight_mask``,
``attn_bias``) is a tensor that may be absent: a variant gives it, so a backward that ignores
it is checked. NIPQ's MaskWeight (forward ``x * weight_mask``, backward ``grad``) PASSed with
the mask never given (corpus 7b dev, issue 18)."""

from __future__ import annotations

import textwrap

import pytest
import torch

from gradsmith.checkrun.session import run_check
from gradsmith.discovery import Source

CASES = '''
import torch


class DenseMask(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight_mask=None):
        if weight_mask is not None:
            return x.mul(weight_mask)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class MaskedGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight_mask=None):
        ctx.save_for_backward(weight_mask)
        if weight_mask is not None:
            return x.mul(weight_mask)
        return x

    @staticmethod
    def backward(ctx, grad):
        (weight_mask,) = ctx.saved_tensors
        return (grad if weight_mask is None else grad * weight_mask), None
'''


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    path = tmp_path_factory.mktemp("optional_mask") / "masks.py"
    path.write_text(textwrap.dedent(CASES))
    result = run_check([Source("file", str(path), "masks.py")], isolate=False)
    return {row["name"].rsplit("::", 1)[-1]: row for row in result.rows}


def test_a_backward_that_ignores_the_mask_fails_on_the_set_that_gives_it(rows):
    row = rows["DenseMask"]
    assert "weight_mask given" in row["inputs"], row["inputs"]
    assert row["verdict"] == "fail", row["text"]
    # Independent reference: with a mask, torch's own gradient of x * mask is the mask.
    x, mask = torch.randn(3, 4, requires_grad=True), torch.randn(4)
    (want,) = torch.autograd.grad(x.mul(mask).sum(), x)
    torch.testing.assert_close(want, mask.expand(3, 4))


def test_the_masked_gradient_passes_with_the_mask_given(rows):
    row = rows["MaskedGrad"]
    assert "weight_mask given" in row["inputs"], row["inputs"]
    assert row["verdict"] == "pass", row["text"]
